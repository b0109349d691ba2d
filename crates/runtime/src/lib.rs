//! troupe-runtime: the protocol types and the actor runtime of troupe.
//!
//! - [`ChatMessage`], [`Conversation`], [`ToolCall`]: messages in the OpenAI Chat Completions
//!   shape, with stable ids.
//! - [`ChatModel`]: the one interface to any LLM, answering as a [`ChatStream`] of
//!   [`ModelDelta`]s.
//! - [`Team`]: a ractor supervisor with named agent actors that restarts failed agents from their
//!   last [`Checkpoint`].
//! - [`EventBus`] and [`Event`]: everything observable, in causal order.
//! - [`TraceContext`]: the trace that travels inside actor messages.
//! - [`sync`]: the one way troupe takes a `std::sync` lock, recovering from poisoning.
//! - Topic modules, whose items have no other path: [`approval`] (tool calls waiting for a
//!   person's answer), [`trace`] (span attribute names, content
//!   recording, the trace file's lines), [`credentials`], [`redact`], [`sync`], [`tls`] (aws-lc-rs,
//!   the one crypto provider HTTPS clients use), [`typed`] (answers asked for as a Rust type);
//!   everything else is at the root, once.

// Every `pub` item is reachable from the crate root: a public item with no public path is a
// mistake (it should be `pub(crate)`), and one path per item keeps the surface readable.
#![deny(unreachable_pub)]

pub mod approval;
mod ask_stream;
pub mod budget;
mod compaction_report;
mod conversation;
pub mod credentials;
mod event;
mod message;
mod model;
mod model_stream;
pub mod redact;
mod supervisor;
pub mod sync;
pub mod tls;
pub mod trace;
mod trace_context;
mod trace_id;
pub mod typed;

pub use ask_stream::{AskItem, AskStream, DELTA_ROOM, RequestWatch};
pub use compaction_report::{
    CompactTrigger, CompactionReceipt, CompactionReport, DroppedArtifact, HookNote, RaisedAim,
    SummarizerUsage, TierCounts,
};
pub use conversation::{Conversation, ConversationMark};
pub use event::{CompactionMode, Event, EventBus, EventRecord};
pub use message::{
    ChatMessage, Content, ContentSlot, FunctionCall, MessageId, MessageKind, ParseMessageIdError,
    Role, StoredMessage, ToolCall, ToolCallsSlot, WireFields, WireNumber, WireValue,
};
pub use model::{
    ChatModel, ChatRequest, ChatResponse, FinishReason, ModelError, ModelInfo, RequestPriority,
    ToolChoice, ToolDefinition, Usage,
};
pub use model_stream::{
    ChatStream, ModelDelta, ResponseAssembler, collect_stream, response_deltas, stream_response,
};
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
pub use supervisor::team::{Team, TeamConfig, TeamError};
pub use supervisor::wire_job::WireJob;
pub use trace_context::TraceContext;
pub use trace_id::{TraceId, TraceIdError};
