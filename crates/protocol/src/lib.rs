//! troupe-protocol: the types every troupe crate speaks, and nothing that runs them.
//!
//! - [`ChatMessage`], [`Conversation`], [`ToolCall`]: messages in the OpenAI Chat Completions
//!   shape, with stable ids.
//! - [`ChatModel`]: the one interface to any LLM, answering as a [`ChatStream`] of
//!   [`ModelDelta`]s; a typed ask's [`ResponseFormat`] rides on its [`ChatRequest`].
//! - [`Event`] and [`EventRecord`]: everything observable; [`EventSink`]: where code that only
//!   publishes sends them (the bus that carries them to subscribers is the runtime's, and
//!   [`NoEvents`] drops them); [`CompactionReport`] and [`CompactTrigger`]: what a compaction
//!   did and why.
//! - [`TraceId`] and [`TraceContext`]: the trace that travels inside actor messages.
//! - [`Spend`], [`SpendLimit`], [`BudgetExceeded`]: what model calls cost and the limits on it;
//!   [`ApprovalId`] and [`ApprovalDecision`]: a paused tool call and a person's answer.
//! - [`FileLedger`]: every file a tool read or modified, which compaction's stubs cite;
//!   [`truncation_marker`]: the one cut marker of a tool output, at dispatch or in compaction.
//! - Topic modules, whose items have no other path: [`trace`] (span attribute names, content
//!   recording, the trace file's lines), [`sync`] (the one way troupe takes a `std::sync` lock),
//!   [`id_hash`] (maps and sets keyed by message ids);
//!   everything else is at the root, once.
//!
//! No actors, no runtime, no network: the pure crates (compaction, tools) depend on this one
//! and not on `troupe-runtime`.

// Every `pub` item is reachable from the crate root: a public item with no public path is a
// mistake (it should be `pub(crate)`), and one path per item keeps the surface readable.
#![deny(unreachable_pub)]

mod approval;
mod compaction_report;
mod conversation;
mod event;
mod event_sink;
pub mod id_hash;
mod ledger;
mod message;
mod model;
mod model_stream;
mod response_format;
mod spend;
pub mod sync;
mod tool_output;
pub mod trace;
mod trace_context;
mod trace_id;

pub use approval::{ApprovalDecision, ApprovalId};
pub use compaction_report::{
    CompactTrigger, CompactionReceipt, CompactionReport, DroppedArtifact, HookNote, RaisedAim,
    SummarizerUsage, TierCounts,
};
pub use conversation::{Conversation, ConversationMark};
pub use event::{CompactionMode, Event, EventRecord};
pub use event_sink::{EventSink, NoEvents};
pub use ledger::{FileAccess, FileLedger, LedgerEntry, SharedLedger};
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
pub use response_format::ResponseFormat;
pub use spend::{BudgetExceeded, BudgetScope, ModelPrice, Spend, SpendLimit};
pub use tool_output::{DEFAULT_OUTPUT_CAP, cap_output, truncation_marker};
pub use trace_context::TraceContext;
pub use trace_id::{TraceId, TraceIdError};
