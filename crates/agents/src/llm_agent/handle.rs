//! [`LlmAgentHandle`]: an LLM agent of a team by name, its jobs as methods
//! (`team.agent::<LlmAgent>("coder")`). Each method sends one [`LlmAgentJob`] as a new trace and
//! waits for its typed answer, within that operation's timeout.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_protocol::{ChatModel, MessageId};
use troupe_runtime::{AgentKind, AgentRef, AskError, Reply};

use super::jobs::{
    CLOSE_SCOPE_TIMEOUT, CONTEXT_TIMEOUT, ClearError, CloseScope, LlmAgentJob, OPEN_SCOPE_TIMEOUT,
    PinError, RESUME_TIMEOUT, SESSION_TIMEOUT, ScopeError, SwitchError,
};
use crate::compression::client::{
    AppliedCompaction, COMPACTION_TIMEOUT, CompactionAskError, can_compact, join_running,
};
use crate::llm_agent::{ContextStats, ConversationCopy, LlmAgent};
use crate::spend::{AgentBudget, TeamBudgets};
use troupe_session::SessionBehind;

impl AgentKind for LlmAgent {
    type Job = LlmAgentJob;
    type Handle<'t> = LlmAgentHandle<'t>;

    fn typed_handle(agent: AgentRef<'_, Self>) -> LlmAgentHandle<'_> {
        LlmAgentHandle { agent }
    }
}

/// An [`LlmAgent`] of a team, by name: `/compact`, scopes, `/clear`, `/resume`, pins,
/// `/context` and the session log's health, as methods. Nothing is asked until one is called;
/// an agent that is not in the team (or is not an `LlmAgent`) answers that call with an error.
#[derive(Debug, Clone)]
pub struct LlmAgentHandle<'t> {
    agent: AgentRef<'t, LlmAgent>,
}

impl LlmAgentHandle<'_> {
    /// The agent's name.
    pub fn name(&self) -> &str {
        self.agent.name()
    }

    async fn ask<T: Send + 'static>(
        &self,
        job: impl FnOnce(Reply<T>) -> LlmAgentJob,
        timeout: Duration,
    ) -> Result<T, AskError> {
        self.agent.ask_job(job, timeout).await
    }

    /// `/compact [focus]` (`focus`: what the summaries should keep in view): refused while the
    /// agent is responding (unless a compaction is running, which this request then joins),
    /// "nothing to compact" below two messages.
    ///
    /// # Errors
    /// [`CompactionAskError`]: no compression agent, the agent is responding or unreachable, or the
    /// compaction failed (the conversation is then unchanged).
    pub async fn compact(
        &self,
        focus: Option<String>,
    ) -> Result<AppliedCompaction, CompactionAskError> {
        let cancel = tokio_util::sync::CancellationToken::new();
        self.compact_cancellable(focus, cancel).await
    }

    /// [`LlmAgentHandle::compact`] that `cancel` can stop (`/compact` interrupted by Ctrl-C):
    /// a compaction this request started answers [`CompactionAskError::Cancelled`] and leaves the
    /// conversation as it was. Joining one that is already running is not cancellable (it is
    /// not this request's).
    ///
    /// # Errors
    /// As [`LlmAgentHandle::compact`], and [`CompactionAskError::Cancelled`].
    pub async fn compact_cancellable(
        &self,
        focus: Option<String>,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<AppliedCompaction, CompactionAskError> {
        let directory = self.agent.directory();
        if !can_compact(directory) {
            return Err(CompactionAskError::NoCompressionAgent);
        }
        if directory.is_responding(self.name()) {
            // Join the compaction already under way instead of starting a second one.
            return join_running(directory, self.name())
                .await
                .unwrap_or(Err(CompactionAskError::Responding));
        }
        let job = |reply| LlmAgentJob::Compact(focus, cancel, reply);
        self.ask(job, COMPACTION_TIMEOUT).await?
    }

    /// The budget the agent was spawned with ([`crate::spawn_agent`], [`crate::TeamBuilder`]),
    /// shared with it: [`AgentBudget::raise`] lets a request its budget paused go on. Read from
    /// the team, not asked of the agent (a paused agent waits inside its request). `None` for
    /// an agent spawned another way, or not in the team.
    pub fn budget(&self) -> Option<AgentBudget> {
        TeamBudgets::of(self.agent.directory()).get(self.name())
    }

    /// Open a scope (seed 000's scoped compression).
    ///
    /// # Errors
    /// [`ScopeError::Ask`] when the agent cannot be reached.
    pub async fn open_scope(&self, label: impl Into<String>) -> Result<(), ScopeError> {
        let label = label.into();
        let job = |reply| LlmAgentJob::OpenScope(label, reply);
        Ok(self.ask(job, OPEN_SCOPE_TIMEOUT).await?)
    }

    /// Close the innermost open scope and compress it into one summary: the summary, or `None`
    /// if the scope was empty (skipped).
    ///
    /// # Errors
    /// [`ScopeError`]: no model, no open scope, no compression agent, or the summary failed.
    pub async fn close_scope(
        &self,
        prompt: Option<String>,
        model: Option<Arc<dyn ChatModel>>,
    ) -> Result<Option<String>, ScopeError> {
        let job = |reply| LlmAgentJob::CloseScope(CloseScope { prompt, model }, reply);
        self.ask(job, CLOSE_SCOPE_TIMEOUT).await?
    }

    /// `/clear` (see [`LlmAgentJob::Clear`]), between the agent's requests: how many tool calls
    /// that waited for approval were dropped with the conversation.
    ///
    /// # Errors
    /// [`ClearError`]: the agent could not be reached, or its session log could not be written
    /// (the conversation is then unchanged).
    pub async fn clear(&self) -> Result<usize, ClearError> {
        self.ask(LlmAgentJob::Clear, SESSION_TIMEOUT)
            .await?
            .map_err(ClearError::Session)
    }

    /// `/resume SESSION`: see [`LlmAgentJob::SwitchSession`]. Answers the number of messages
    /// restored.
    ///
    /// # Errors
    /// [`SwitchError`]: the agent keeps no log, the other one is unusable, or the agent could
    /// not be reached; it then keeps its conversation and its log.
    pub async fn switch_session(&self, path: impl Into<PathBuf>) -> Result<usize, SwitchError> {
        let path = path.into();
        let job = |reply| LlmAgentJob::SwitchSession(path, reply);
        self.ask(job, SESSION_TIMEOUT).await?
    }

    /// Pin (`pinned: true`) or unpin message `id` of the conversation: see
    /// [`LlmAgentJob::Pin`].
    ///
    /// # Errors
    /// [`PinError::UnknownMessage`] when the conversation does not hold `id`; [`PinError::Ask`]
    /// when the agent cannot be reached.
    pub async fn pin(&self, id: MessageId, pinned: bool) -> Result<(), PinError> {
        let job = |reply| LlmAgentJob::Pin(id, pinned, reply);
        self.ask(job, SESSION_TIMEOUT).await?
    }

    /// `/context`: tokens, percent, per-kind breakdown and the last compaction.
    ///
    /// # Errors
    /// [`AskError`] when the agent cannot be reached.
    pub async fn context_stats(&self) -> Result<ContextStats, AskError> {
        self.ask(LlmAgentJob::ContextStats, CONTEXT_TIMEOUT).await
    }

    /// The conversation and the archive as they stand (see [`LlmAgentJob::Conversation`]),
    /// answered between requests.
    ///
    /// # Errors
    /// [`AskError`] when the agent cannot be reached.
    pub async fn conversation(&self) -> Result<ConversationCopy, AskError> {
        self.ask(LlmAgentJob::Conversation, CONTEXT_TIMEOUT).await
    }

    /// Whether the session log is behind the conversation, and since how many commit points
    /// (see [`SessionBehind`]). Ask after a request or a compaction: a failed write is then
    /// known at once, not only from a log line.
    ///
    /// # Errors
    /// [`AskError`] when the agent cannot be reached.
    pub async fn session_health(&self) -> Result<Option<SessionBehind>, AskError> {
        self.ask(LlmAgentJob::SessionHealth, SESSION_TIMEOUT).await
    }

    /// Finish the request the session log showed in flight when the agent was built (a process
    /// or the agent stopped mid-request, with durable steps): from its last committed step, no
    /// model call made again and no finished tool run again. Its answer (also committed to the
    /// log and published as [`troupe_protocol::Event::RequestResumed`]), or `None` when no
    /// request was in flight.
    ///
    /// # Errors
    /// [`AskError`] when the agent cannot be reached; the inner error is the request's.
    pub async fn resume_request(
        &self,
    ) -> Result<Option<Result<String, troupe_runtime::AgentError>>, AskError> {
        self.ask(LlmAgentJob::ResumeRequest, RESUME_TIMEOUT).await
    }
}
