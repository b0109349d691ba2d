//! troupe-a2a: troupe and the Agent2Agent protocol, A2A 1.0 over JSON-RPC, both ways.
//!
//! - A remote A2A agent is a teammate: [`join_team`] reads its card and adds it to a team under
//!   a name; it is asked like any agent (`team.ask`, `ask_agent`), streams its text as the
//!   team's deltas, keeps its `contextId` per conversation, answers `input-required` with its
//!   question, and cancels its task when the asker stops listening ([`A2aAgent`]).
//! - A team's agents are A2A agents: [`serve`] gives each chosen agent a card and a JSON-RPC
//!   endpoint (send, stream, get, list, cancel, subscribe), with optional Bearer or API-key auth.
//! - [`wire`]: the protocol's types, as A2A 1.0's protobuf JSON mapping has them.
//!
//! Every exchange is bounded ([`ClientLimits`], the server's body limit): a hostile peer costs
//! bounded memory and time and gets a clear error ([`A2aError`]).

// Every `pub` item is reachable from the crate root: a public item with no public path is a
// mistake (it should be `pub(crate)`), and one path per item keeps the surface readable.
#![deny(unreachable_pub)]

mod body;
mod client;
mod error;
mod ids;
mod limits;
mod remote_agent;
mod server;
pub mod wire;

pub use client::{A2aClient, A2aEventStream, A2aRemote};
pub use error::{A2aError, ServeError};
pub use limits::{ClientLimits, DEFAULT_MAX_REQUEST_BYTES};
pub use remote_agent::{A2aAgent, INPUT_REQUIRED_PREFIX, JoinError, RemoteConversation, join_team};
pub use server::{
    A2aServeConfig, A2aServer, DEFAULT_CONTEXT_IDLE, DEFAULT_MAX_CONTEXT_LOG_BYTES,
    DEFAULT_MAX_CONTEXT_LOGS, DEFAULT_MAX_CONTEXTS, ServedAgent, ServerAuth, serve,
};
