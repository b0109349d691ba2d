//! troupe-runtime: the actor runtime of troupe; the types it carries are `troupe_protocol`'s.
//!
//! - [`Team`]: a ractor supervisor with named agent actors that restarts failed agents from their
//!   last [`Checkpoint`]; [`Directory`] asks them by name, typed jobs ([`JobRequest`], [`Reply`])
//!   reach their behaviour.
//! - [`EventBus`]: every `troupe_protocol::Event`, in causal order, to broadcast subscribers and
//!   to the stream of the request it belongs to ([`AskStream`]).
//! - Topic modules, whose items have no other path: [`approval`] (the desk where tool calls wait
//!   for a person's answer), [`budget`] (the team's spend, shared by its agents), [`redact`],
//!   [`typed`] (answers asked for as a Rust type, checked against their schema); everything else
//!   is at the root, once.
//!
//! Credentials and the TLS crypto provider are `troupe_host`'s: crates that need them and not the
//! actors (the tools, the model providers) reach them without this crate.

// Every `pub` item is reachable from the crate root: a public item with no public path is a
// mistake (it should be `pub(crate)`), and one path per item keeps the surface readable.
#![deny(unreachable_pub)]

pub mod approval;
mod ask_stream;
pub mod budget;
mod event_bus;
pub mod redact;
mod supervisor;
pub mod typed;

pub use ask_stream::{AskItem, AskStream, DELTA_ROOM, RequestWatch};
pub use event_bus::EventBus;
pub use supervisor::actor::AgentMsg;
pub use supervisor::behavior::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, BehaviorState,
    Checkpoint,
};
pub use supervisor::directory::{AskError, Directory};
pub use supervisor::handle::{AgentKind, AgentRef};
pub use supervisor::job::{JobRequest, Reply};
pub use supervisor::overflow::ContextOverflow;
pub use supervisor::remote::RemoteAgents;
pub use supervisor::supervisor::{RestartPolicy, SpawnError};
pub use supervisor::team::{Team, TeamConfig, TeamError, TeamSpawner};
pub use supervisor::wire_job::WireJob;
