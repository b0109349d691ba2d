//! [`LlmAgent`]: an agent backed by a chat model and its tools.
//!
//! One request: the request becomes a user message; then turns — a model call, then the tool
//! calls it asked for and their results — until the model answers without tool calls (the final
//! answer) or `max_turns` model calls have been made. Each concern has its file: the turn loop
//! (`turn.rs`), the budget check before every model call and the output reserve (`precall.rs`,
//! refusing with [`troupe_runtime::ContextOverflow`]), the budget check after each turn and how
//! the agent asks for a compaction and applies it (`budget.rs`, through the compaction client
//! in `compression/client.rs`), the compaction it runs ahead of the trigger while it works on
//! and splices in later (`work_ahead.rs`), the agent-callable `compact` tool
//! (`compact_tool.rs`), the agent-callable `recall` of archived originals (`recall_tool.rs`),
//! scoped compression (`scopes.rs`), context statistics (`context.rs`), the session log's operations —
//! `/clear`, `/resume`, a changed system prompt, the write at a commit point
//! (`session_ops.rs`); this file holds the agent's state, its construction and the
//! [`AgentBehavior`] that dispatches requests and jobs.

mod approval;
mod budget;
mod compact_tool;
mod context;
mod context_stats;
mod handle;
mod jobs;
mod oversized_answer;
mod pins;
mod precall;
mod recall_tool;
mod request;
mod scopes;
mod session_ops;
mod spend_pause;
mod tool_span;
mod tool_tokens;
mod turn;
mod work_ahead;

pub use context_stats::{ContextShare, ContextStats, InFlightCompaction};
pub use handle::LlmAgentHandle;
pub use jobs::{
    ClearError, CloseScope, LlmAgentJob, PinError, ScopeError, SwitchError, clear_conversation,
    close_scope, compact_agent, compact_agent_cancellable, context_stats, open_scope, pin_message,
    session_health, switch_session,
};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use troupe_compaction::{Archive, BudgetPolicy, CompactTrigger, CompactionReport};
use troupe_runtime::trace::semconv;
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, BehaviorState,
    ChatModel, Checkpoint, Conversation, JobRequest, MessageId, TraceContext,
};
use troupe_tools::{FileLedger, ToolRegistry};

use crate::compression::client::{AppliedCompaction, CompactError};
use crate::session::{SessionClaim, SessionSync, restore};
use crate::spec::AgentSpec;
use crate::team_tools::{AskAgentTool, TeamLink};
use context::Context;
use request::RequestContext;

pub use compact_tool::COMPACT_TOOL;
pub use recall_tool::RECALL_TOOL;

/// An agent whose answers come from a [`troupe_runtime::ChatModel`] and its tools.
pub struct LlmAgent {
    spec: AgentSpec,
    tools: ToolRegistry,
    link: TeamLink,
    /// The conversation, what stands behind it and how it is measured (`context.rs`).
    context: Context,
    /// Open scopes, innermost last: label and the first id that belongs to it.
    scopes: Vec<(String, MessageId)>,
    last_scope_model: Option<Arc<dyn ChatModel>>,
    /// The session log, when the spec names one.
    session: Option<SessionSync>,
    /// What its `invoke_agent` spans record as `gen_ai.conversation.id` and `session.id`.
    conversation_id: String,
    /// The trace of the last request or job: what the agent does between requests (landing or
    /// cancelling its job at shutdown) is published there. The request being handled is a
    /// [`RequestContext`], passed down.
    last_trace: TraceContext,
    /// The compaction running ahead of the trigger, and what makes its answer stale
    /// (`work_ahead.rs`). It outlives requests: agent state, not a request's.
    ahead: work_ahead::WorkAheadState,
    /// The open calls of a turn the session log shows paused for approval (`approval.rs`):
    /// answered before the next request.
    paused: Vec<crate::session::PausedCall>,
    /// What the agent spent against its budgets (`spend.rs`); shared with its compactions.
    spend: crate::spend::SpendMeter,
}

/// What an [`LlmAgent`] keeps across restarts beyond its conversation: its checkpoint's
/// [`BehaviorState`], read back with `checkpoint.state.get::<LlmAgentState>()`.
#[derive(Debug, Default, Clone)]
pub struct LlmAgentState {
    /// The file ledger of the agent's tool calls.
    pub ledger: FileLedger,
    /// Every message compaction replaced (shared with the agent: cloning is O(1)).
    pub archive: Archive,
    /// The report of the agent's last compaction.
    pub last_compaction: Option<CompactionReport>,
    /// The context's `ledger_epoch` when `ledger` was copied.
    ledger_epoch: u64,
}

impl LlmAgent {
    /// A fresh agent, or one restored from a checkpoint. Its session log, if any, is locked for
    /// as long as the agent lives.
    pub fn new(spec: AgentSpec, checkpoint: Option<Checkpoint>) -> Result<Self, AgentError> {
        Self::build(spec, checkpoint, None)
    }

    /// [`LlmAgent::new`], opening the session log under `claim` when given.
    fn build(
        spec: AgentSpec,
        checkpoint: Option<Checkpoint>,
        claim: Option<&SessionClaim>,
    ) -> Result<Self, AgentError> {
        let link = TeamLink::default();
        let mut tools = spec.tools.clone();
        if spec.team_messaging {
            tools
                .register(AskAgentTool { link: link.clone() })
                .map_err(|e| AgentError::Failed(e.to_string()))?;
        }
        let mut session = None;
        let mut restored = None;
        let mut paused = Vec::new();
        // After a `/resume`, the claim holds the log the agent switched to: a rebuild keeps it.
        let path = claim
            .and_then(SessionClaim::held_path)
            .or_else(|| spec.session.clone());
        if let Some(path) = &path {
            let (mut sync, logged) = SessionSync::open(path, &spec.name, claim)
                .map_err(|e| AgentError::Failed(e.to_string()))?;
            for warning in &logged.warnings {
                tracing::warn!(agent = %spec.name, "{warning}");
            }
            // A turn paused for approval was written to the log mid-request, after the last
            // checkpoint: the log is newer then, and the agent resumes from it.
            if checkpoint.is_none() || !logged.paused.is_empty() {
                let r = restore(&logged);
                paused.clone_from(&r.paused);
                restored = Some(r);
            }
            // Written only once the log has restored: a log refused above stays as it was (apart
            // from a torn last line, which opening cuts off).
            sync.note_model(logged.model.as_deref(), &spec.model.info().name)
                .map_err(|e| AgentError::Failed(e.to_string()))?;
            session = Some(sync);
        }
        let (conversation, state) = match (checkpoint, restored) {
            (Some(c), None) => {
                let state = c.state.get::<LlmAgentState>().cloned().unwrap_or_default();
                (c.conversation, state)
            }
            (_, Some(r)) => (
                r.conversation,
                LlmAgentState {
                    ledger: r.ledger,
                    archive: r.archive,
                    last_compaction: r.last_compaction,
                    ledger_epoch: 0,
                },
            ),
            (None, None) => (Conversation::new(), LlmAgentState::default()),
        };
        let conversation_id = conversation_id(&spec.name, path.as_deref());
        let policy = spec
            .compaction
            .policy_for(spec.model.info().context_window, spec.max_tokens);
        policy
            .validate()
            .map_err(|e| AgentError::Failed(format!("invalid compaction policy: {e}")))?;
        let check = spec.compaction.context_check(&policy);
        let counter = spec.compaction.counter();
        let spend = crate::spend::SpendMeter::new(spec.budget.clone());
        Ok(LlmAgent {
            spec,
            tools,
            link,
            context: Context::new(conversation, state, policy, check, counter),
            scopes: Vec::new(),
            last_scope_model: None,
            session,
            conversation_id,
            last_trace: TraceContext::new_root(),
            ahead: work_ahead::WorkAheadState::default(),
            paused,
            spend,
        })
    }

    /// A factory the supervisor uses to build (and rebuild) this agent. The factory holds the
    /// session log's lock, so a rebuilt agent never finds its log locked by its predecessor.
    pub fn factory(spec: AgentSpec) -> BehaviorFactory {
        let claim = SessionClaim::default();
        Arc::new(move |checkpoint| {
            let agent = LlmAgent::build(spec.clone(), checkpoint, Some(&claim))?;
            Ok(Box::new(agent) as Box<dyn AgentBehavior>)
        })
    }

    /// The conversation so far.
    pub fn conversation(&self) -> &Conversation {
        &self.context.conversation
    }

    /// The open calls of a turn the session log showed paused for approval: the next request
    /// answers them first (asking again where the policy asks).
    pub fn paused_calls(&self) -> &[crate::session::PausedCall] {
        &self.paused
    }

    /// The file ledger of this agent's tool calls.
    pub fn ledger(&self) -> FileLedger {
        self.context.ledger.snapshot()
    }

    /// The tools this agent can call.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Register a tool while the agent runs (between requests); a duplicate name is an error.
    pub fn tools_mut(&mut self) -> &mut ToolRegistry {
        &mut self.tools
    }

    /// The archive of every message compaction replaced (for `expand`).
    pub fn archive(&self) -> &Archive {
        &self.context.archive
    }

    /// Tokens in the conversation now (cached per shared message: new messages are counted,
    /// the rest cost a pointer comparison each).
    pub fn tokens(&self) -> usize {
        self.context.tokens()
    }

    /// The budget policy in force.
    pub fn policy(&self) -> &BudgetPolicy {
        &self.context.policy
    }

    /// A manual compaction that `cancel` abandons while it waits for the compressor: the
    /// compressor's answer is then dropped and nothing of the conversation changed (it is only
    /// applied after that wait, with no await in between). The abandoned compaction announces
    /// its end and leaves the tracker as it is dropped (`compression/client.rs`).
    async fn compact_unless_cancelled(
        &mut self,
        focus: Option<String>,
        cancel: &tokio_util::sync::CancellationToken,
        ctx: &AgentContext,
        job: &mut RequestContext,
    ) -> Result<AppliedCompaction, CompactError> {
        tokio::select! {
            outcome = self.compact(CompactTrigger::Manual, focus, ctx, job) => outcome,
            () = cancel.cancelled() => Err(CompactError::Cancelled),
        }
    }
}

#[async_trait]
impl AgentBehavior for LlmAgent {
    async fn handle(
        &mut self,
        request: AgentRequest,
        ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        let span = tracing::Span::current();
        span.record(semconv::CONVERSATION_ID, self.conversation_id.as_str());
        span.record(semconv::SESSION_ID, self.conversation_id.as_str());
        self.last_trace = request.trace;
        let mut req = RequestContext::new(request.trace);
        self.link.set(ctx.directory.clone(), request.trace);
        // A compaction that landed between requests goes in before this one starts (not part
        // of what a rollback of this request undoes).
        self.land_background(ctx, &mut req);
        // A turn paused before a restart is finished first, outside what a rollback of this
        // request undoes: its calls may have run.
        self.finish_paused(ctx, req.trace.id()).await?;
        req.mark(&self.context.conversation);
        // O(1) copies: a request refused before its model call puts them back too.
        let archive_before = self.context.archive.clone();
        let report_before = self.context.last_compaction.clone();
        self.start_request(&request);
        let format = request.response_format.as_ref();
        let outcome = self.run_turns(ctx, &mut req, format).await;
        if let Err(
            AgentError::Model(_)
            | AgentError::Cancelled
            | AgentError::Refused(_)
            | AgentError::ContextOverflow(_),
        ) = &outcome
        {
            // A provider fault loses nothing and adds nothing: the caller may simply retry. An
            // abandoned request leaves the conversation as it found it too, and so does one
            // refused before its model call (`ContextOverflow`): the caller may send less.
            req.roll_back(&mut self.context.conversation, &self.spec.name);
        }
        if let Err(AgentError::Refused(_) | AgentError::ContextOverflow(_)) = &outcome {
            // A compaction before the refusal is undone whole, so the session log stays as the
            // request found it (new archive entries would be written as a compaction).
            self.context.archive = archive_before;
            self.context.last_compaction = report_before;
        }
        // The actor publishes the request's finish once this returns: after the session log.
        self.persist();
        outcome
    }

    async fn handle_job(&mut self, job: JobRequest, ctx: &AgentContext) -> Result<(), AgentError> {
        self.last_trace = job.trace();
        // A job is never rolled back: nothing marks it.
        let mut req = RequestContext::new(job.trace());
        match job.open::<LlmAgentJob>(&ctx.name)? {
            LlmAgentJob::Compact(focus, cancel, reply) => {
                let outcome = if self.context.conversation.len() < 2 {
                    Err(CompactError::NothingToCompact)
                } else {
                    self.compact_unless_cancelled(focus, &cancel, ctx, &mut req)
                        .await
                };
                if outcome.is_ok() {
                    self.persist();
                }
                reply.send(outcome);
            }
            LlmAgentJob::OpenScope(label, reply) => {
                self.scopes
                    .push((label, self.context.conversation.next_id()));
                reply.send(());
            }
            LlmAgentJob::CloseScope(CloseScope { prompt, model }, reply) => {
                let closed = self.close_scope(prompt, model, ctx, &req).await;
                if closed.is_ok() {
                    self.persist();
                }
                reply.send(closed);
            }
            LlmAgentJob::Clear(reply) => reply.send(self.clear()),
            LlmAgentJob::SwitchSession(path, reply) => reply.send(self.switch_session(&path)),
            LlmAgentJob::ContextStats(reply) => reply.send(self.context_stats()),
            LlmAgentJob::Pin(id, pinned, reply) => reply.send(self.set_pinned(id, pinned)),
            LlmAgentJob::SessionHealth(reply) => {
                reply.send(self.session.as_ref().and_then(SessionSync::behind));
            }
        }
        Ok(())
    }

    /// A compaction working ahead is landed or cancelled (`work_ahead.rs`), and the session
    /// log keeps what landed.
    async fn stop(&mut self, ctx: &AgentContext) {
        let mut between = RequestContext::new(self.last_trace);
        self.stop_background(ctx, &mut between).await;
        self.persist();
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            conversation: self.context.conversation.clone(),
            state: BehaviorState::new(self.context.state()),
        }
    }

    /// O(what changed): the new messages, the new ledger entries; the archive is shared.
    fn update_checkpoint(&self, checkpoint: &mut Checkpoint) {
        checkpoint.conversation.catch_up(&self.context.conversation);
        let Some(state) = checkpoint.state.get_mut::<LlmAgentState>() else {
            checkpoint.state = BehaviorState::new(self.context.state());
            return;
        };
        self.context.update_state(state);
    }
}

/// The conversation an agent's spans name: its session log (the same log is the same
/// conversation across runs), else one id for this agent's life in this process.
fn conversation_id(agent: &str, session: Option<&Path>) -> String {
    match session {
        Some(path) => format!("{agent}@{}", path.display()),
        None => format!("{agent}-{}", TraceContext::new_root().id()),
    }
}
