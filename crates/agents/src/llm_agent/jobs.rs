//! The jobs an [`LlmAgent`](crate::LlmAgent) takes between requests — `/compact`, opening and
//! closing a scope, `/clear`, `/resume`, `/context`, its session log's health — as one enum
//! whose variants carry their typed answer port, each operation with its own error and its own
//! timeout. [`LlmAgentHandle`](crate::LlmAgentHandle) (`handle.rs`) sends them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_protocol::{ChatModel, MessageId};
use troupe_runtime::{AskError, Reply};

use crate::compression::ScopeSummaryError;
use crate::compression::client::{AppliedCompaction, COMPACTION_TIMEOUT, CompactionAskError};
use crate::llm_agent::ContextStats;
use troupe_session::SessionBehind;
use troupe_session::SessionError;

/// How long opening a scope may take: nothing but a push, once the agent is between requests —
/// the margin is for the request the job waits behind in the agent's mailbox.
pub(super) const OPEN_SCOPE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long closing a scope may take: the compression agent's summary (a model call, which may
/// itself wait behind a compaction), after the request the job waits behind.
pub(super) const CLOSE_SCOPE_TIMEOUT: Duration = COMPACTION_TIMEOUT;

/// How long `/clear`, `/resume` and the session health question may take: they read or write
/// one session log (a long one loads in seconds), after the request they wait behind.
pub(super) const SESSION_TIMEOUT: Duration = Duration::from_secs(120);

/// How long finishing a request in flight may take: the model calls and tool runs it has left.
pub(super) const RESUME_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long `/context` may take: it counts the conversation's tokens (cached per message),
/// after the request it waits behind.
pub(super) const CONTEXT_TIMEOUT: Duration = Duration::from_secs(120);

/// The jobs an [`LlmAgent`](crate::LlmAgent) takes; give one through its handle,
/// `team.agent::<LlmAgent>(name)`, whose method each variant names.
#[derive(Debug)]
#[non_exhaustive]
pub enum LlmAgentJob {
    /// `/compact [focus]`
    /// ([`LlmAgentHandle::compact_cancellable`](crate::LlmAgentHandle::compact_cancellable)).
    /// Cancelling the token abandons the compaction while it runs (the compressor's answer is then
    /// dropped, the conversation unchanged) and answers [`CompactionAskError::Cancelled`]; once the
    /// result is applied it is too late.
    Compact(
        Option<String>,
        tokio_util::sync::CancellationToken,
        Reply<Result<AppliedCompaction, CompactionAskError>>,
    ),
    /// Open a scope labelled so: everything from here on belongs to it until it is closed
    /// ([`LlmAgentHandle::open_scope`](crate::LlmAgentHandle::open_scope)).
    OpenScope(String, Reply<()>),
    /// Close the innermost open scope, replacing its messages by one summary between markers
    /// ([`LlmAgentHandle::close_scope`](crate::LlmAgentHandle::close_scope)): what the summary
    /// should keep, and the model that writes it (else the last one used for a scope). Answers the
    /// summary, or `None` when the scope was empty.
    CloseScope(CloseScope, Reply<Result<Option<String>, ScopeError>>),
    /// `/clear` ([`LlmAgentHandle::clear`](crate::LlmAgentHandle::clear)): forget the conversation,
    /// its file ledger and last report, and record the fresh start in the session log (loading it
    /// then starts from there). The archive is kept. Tool calls a paused turn left waiting for
    /// approval belong to the conversation and go with it (the log's clear record drops them too):
    /// answers how many. `Err` when the log could not be written; the conversation is then
    /// unchanged.
    Clear(Reply<Result<usize, SessionError>>),
    /// `/resume SESSION`
    /// ([`LlmAgentHandle::switch_session`](crate::LlmAgentHandle::switch_session)): continue from
    /// another session log. The agent writes what changed as a last commit to the log it has, takes
    /// the other log's lock, loads it and lets go of the old one; from then on it (and any restart
    /// of it) keeps the new log. Switching to the log it already keeps reloads it. Answers the
    /// number of messages restored, or why the agent stays on its current log (then nothing
    /// changed).
    SwitchSession(PathBuf, Reply<Result<usize, SwitchError>>),
    /// `/context` ([`LlmAgentHandle::context_stats`](crate::LlmAgentHandle::context_stats)):
    /// tokens, percent, per-kind breakdown and the last compaction.
    ContextStats(Reply<ContextStats>),
    /// The conversation and the archive as they stand between requests
    /// ([`LlmAgentHandle::conversation`](crate::LlmAgentHandle::conversation)): what a live
    /// view shows of the agent, and reads archived originals from.
    Conversation(Reply<ConversationCopy>),
    /// Whether the session log is behind the conversation
    /// ([`LlmAgentHandle::session_health`](crate::LlmAgentHandle::session_health)): `None` when it
    /// is in step (or the agent keeps no log).
    SessionHealth(Reply<Option<SessionBehind>>),
    /// Finish the request the session log showed in flight (durable steps), from its last
    /// committed step ([`LlmAgentHandle::resume_request`](crate::LlmAgentHandle::resume_request)):
    /// its answer, `None` when no request was in flight. The next request does the same first.
    ResumeRequest(Reply<Option<Result<String, troupe_runtime::AgentError>>>),
    /// Pin (`true`) or unpin a message of the conversation
    /// ([`LlmAgentHandle::pin`](crate::LlmAgentHandle::pin)): compaction keeps a pinned message
    /// byte-identical. Written to the session log at once; a compaction working ahead on a copy
    /// from before is dropped when it lands.
    Pin(MessageId, bool, Reply<Result<(), PinError>>),
}

/// An agent's conversation and archive, as [`LlmAgentJob::Conversation`] answers them: copies
/// that share their messages and entries with the agent's (O(1) each, per message at most).
#[derive(Debug, Clone)]
pub struct ConversationCopy {
    /// The conversation, summaries and stubs where compaction put them.
    pub conversation: troupe_protocol::Conversation,
    /// Every original compaction replaced (what `recall` reads back).
    pub archive: troupe_compaction::Archive,
}

/// What [`LlmAgentJob::CloseScope`] asks for.
#[derive(Clone, Default)]
pub struct CloseScope {
    /// What the summary should keep.
    pub prompt: Option<String>,
    /// The model that writes it (else the last one used for a scope, else an error).
    pub model: Option<Arc<dyn ChatModel>>,
}

impl std::fmt::Debug for CloseScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloseScope")
            .field("prompt", &self.prompt)
            .field("model", &self.model.as_ref().map(|m| m.info().name))
            .finish()
    }
}

/// Why a scope was not opened or closed; the conversation and the open scopes are unchanged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// No model given and none used for a scope before.
    #[error("compress requires a model but none declared")]
    NoModel,
    /// No open scope to close.
    #[error("no open scope to compress")]
    NoScope,
    /// The team has no compression agent to write the summary.
    #[error(
        "the team has no compression agent (spawn it with troupe_agents::spawn_compression_agent)"
    )]
    NoCompressionAgent,
    /// The closed scope could not be summarized.
    #[error("compressing the scope failed: {0}")]
    Scope(ScopeSummaryError),
    /// The agent or its compression agent could not be reached.
    #[error(transparent)]
    Ask(#[from] AskError),
}

/// Why a pin did not change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PinError {
    /// The agent could not be reached.
    #[error(transparent)]
    Ask(#[from] AskError),
    /// The conversation holds no such message (compacted away, or never there).
    #[error("the conversation holds no message {0}")]
    UnknownMessage(MessageId),
}

/// Why `/clear` did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClearError {
    /// The agent could not be reached.
    #[error(transparent)]
    Ask(#[from] AskError),
    /// Its session log could not be written; nothing was cleared.
    #[error("the session log could not record the clear: {0}")]
    Session(SessionError),
}

/// Why `/resume` did not happen; the agent keeps its conversation and its log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SwitchError {
    /// The agent could not be reached.
    #[error(transparent)]
    Ask(#[from] AskError),
    /// The agent keeps no session log (its spec names none), so there is nothing to switch.
    #[error("agent `{0}` keeps no session log")]
    NoSession(String),
    /// The other log is in use, unreadable or invalid, or could not be written.
    #[error(transparent)]
    Session(#[from] SessionError),
}
