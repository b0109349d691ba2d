//! [`LlmAgent`]: an agent backed by a chat model and its tools.
//!
//! One request: the request becomes a user message; then turns — a model call, then the tool
//! calls it asked for and their results — until the model answers without tool calls (the final
//! answer) or `max_turns` model calls have been made. The turn loop is `turn.rs` (`run_turns`).
//!
//! The agent's state is grouped by kind, each type with its impl in its own file: its
//! `Context` (`context.rs`: the conversation, the archive, the file ledger, the token cache,
//! the policy and the context check; what fits the window in `context/fit.rs`), the work it has
//! compacted ahead (`work_ahead.rs`: `WorkAheadState`), its journal (`journal.rs`: `Journal`,
//! the session log with the request's place in it and the paused calls, and the one `commit` of
//! a typed `Step`) and its spend (`crate::spend::SpendMeter`, checked before every model call in
//! `spend_pause.rs`). The request being handled is a `RequestContext` (`request.rs`), built
//! when it opens and passed down: its trace and what a rollback needs.
//!
//! The agent's own operations: the context check before every model call and after every turn
//! and tool batch (`context_check.rs`, carrying out `troupe_compaction::context_check`'s
//! decision, refusing with [`troupe_runtime::ContextOverflow`]), how it asks for a compaction
//! and applies it (`compacting.rs`, through the compaction client in `compression/client.rs`),
//! tool approval (`approval.rs`), the agent-callable `compact` tool (`compact_tool.rs`), the
//! agent-callable `recall` of archived originals (`recall_tool.rs`), scoped compression
//! (`scopes.rs`), pins (`pins.rs`), `/context` (`context/stats.rs`), durable steps — the
//! request's close and resuming the one a restart left in flight (`steps.rs`); the session
//! log's operations — `/clear`, `/resume`, a changed system prompt (`session_ops.rs`); its jobs
//! (`jobs.rs`) and its typed handle (`handle.rs`). This file holds the agent's fields, its
//! construction and the [`AgentBehavior`] that dispatches requests and jobs.

mod approval;
mod compact_tool;
mod compacting;
mod context;
mod context_check;
mod handle;
mod jobs;
mod journal;
mod pins;
mod recall_tool;
mod request;
mod scopes;
mod session_ops;
mod spend_pause;
mod steps;
mod tool_span;
mod tool_tokens;
mod turn;
mod work_ahead;

pub use context::{ContextShare, ContextStats, InFlightCompaction};
pub use handle::LlmAgentHandle;
pub use jobs::{
    ClearError, CloseScope, ConversationCopy, LlmAgentJob, PinError, ScopeError, SwitchError,
};
use std::sync::Arc;

use async_trait::async_trait;
use troupe_compaction::{Archive, ContextPolicy};
use troupe_protocol::CompactionReport;
use troupe_protocol::FileLedger;
use troupe_protocol::trace::semconv;
use troupe_protocol::{Conversation, TraceContext};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, BehaviorState,
    Checkpoint, JobRequest,
};
use troupe_tools::ToolRegistry;

use crate::compression::client::CompactionAskError;
use crate::spec::AgentSpec;
use crate::team_tools::{AskAgentTool, TeamLink};
use context::Context;
use journal::{AtOpen, Journal, Step};
use request::RequestContext;
use scopes::Scopes;
use troupe_session::SessionClaim;

pub use compact_tool::COMPACT_TOOL;
pub use recall_tool::RECALL_TOOL;

/// An agent whose answers come from a [`troupe_protocol::ChatModel`] and its tools.
pub struct LlmAgent {
    spec: AgentSpec,
    tools: ToolRegistry,
    link: TeamLink,
    /// The conversation, what stands behind it and how it is measured (`context.rs`).
    context: Context,
    /// Its open scopes and the model that summarized the last one (`scopes.rs`).
    scopes: Scopes,
    /// Its journal: the session log, when it keeps one, the request's place in it and the
    /// paused calls (`journal.rs`).
    journal: Journal,
    /// The trace of the last request or job: what the agent does between requests (landing or
    /// cancelling its job at shutdown) is published there. The request being handled is a
    /// [`RequestContext`], passed down.
    last_trace: TraceContext,
    /// The compaction running ahead of the trigger, and what makes its answer stale
    /// (`work_ahead.rs`). It outlives requests: agent state, not a request's.
    ahead: work_ahead::WorkAheadState,
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
    /// The conversation as the request in flight found it, while that request is resumed
    /// after the agent failed in it: where a second failure rolls it back to (the checkpoint's
    /// conversation is the resumed one by then).
    before_in_flight: Option<Conversation>,
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
        let (mut journal, restored, at_open) = Journal::open(&spec, checkpoint.is_some(), claim)?;
        // A request resumed after a failure rolls back, if it fails again, to where the
        // checkpoint of the first failure says the request found the conversation.
        if at_open == AtOpen::ResumeAfterFailure {
            journal.keep_before_in_flight(checkpoint.as_ref().map(|c| c.conversation.clone()));
        }
        let (conversation, state) = match (checkpoint, restored) {
            (Some(c), None) => {
                let mut state = c.state.get::<LlmAgentState>().cloned().unwrap_or_default();
                let conversation = match state.before_in_flight.take() {
                    Some(before) if at_open == AtOpen::CloseAsRolledBack => before,
                    _ => c.conversation,
                };
                (conversation, state)
            }
            (_, Some(r)) => (
                r.conversation,
                LlmAgentState {
                    ledger: r.ledger,
                    archive: r.archive,
                    last_compaction: r.last_compaction,
                    ledger_epoch: 0,
                    before_in_flight: None,
                },
            ),
            (None, None) => (Conversation::new(), LlmAgentState::default()),
        };
        let policy = spec
            .compaction
            .policy_for(spec.model.info().context_window, spec.max_tokens);
        policy
            .validate()
            .map_err(|e| AgentError::Failed(format!("invalid compaction policy: {e}")))?;
        let check = spec.compaction.context_check(&policy);
        let counter = spec.compaction.counter();
        let spend = crate::spend::SpendMeter::new(spec.budget.clone());
        let mut agent = LlmAgent {
            spec,
            tools,
            link,
            context: Context::new(conversation, state, policy, check, counter),
            scopes: Scopes::default(),
            journal,
            last_trace: TraceContext::new_root(),
            ahead: work_ahead::WorkAheadState::default(),
            spend,
        };
        match at_open {
            AtOpen::CloseAsRolledBack => agent.close_failed_in_flight(),
            // Resumed once, by the next request or `LlmAgentHandle::resume_request`: the
            // attempt is committed now, before anything of it runs, so the agent failing again
            // anywhere in it closes the request as rolled back at the next rebuild.
            AtOpen::ResumeAfterFailure => agent.commit(Step::Resuming),
            AtOpen::Resume | AtOpen::Nothing => {}
        }
        Ok(agent)
    }

    /// A factory the supervisor uses to build (and rebuild) this agent. The factory holds the
    /// session log's lock, so a rebuilt agent never finds its log locked by its predecessor.
    pub fn factory(spec: AgentSpec) -> BehaviorFactory {
        let claim = SessionClaim::new(spec.session_store.clone());
        Arc::new(move |checkpoint| {
            let agent = LlmAgent::build(spec.clone(), checkpoint, Some(&claim))?;
            Ok(Box::new(agent) as Box<dyn AgentBehavior>)
        })
    }

    /// The spec it was built from: what builds another agent like it (troupe-a2a's agent per
    /// conversation).
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// The instructions it was built with (its system prompt from its first request on).
    pub fn instructions(&self) -> &str {
        &self.spec.instructions
    }

    /// The conversation so far.
    pub fn conversation(&self) -> &Conversation {
        &self.context.conversation
    }

    /// The open calls of a turn the session log showed paused for approval: the next request
    /// answers them first (asking again where the policy asks).
    pub fn paused_calls(&self) -> &[troupe_session::PausedCall] {
        &self.journal.paused
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

    /// The context policy in force.
    pub fn policy(&self) -> &ContextPolicy {
        &self.context.policy
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
        span.record(
            semconv::CONVERSATION_ID,
            self.journal.conversation_id.as_str(),
        );
        span.record(semconv::SESSION_ID, self.journal.conversation_id.as_str());
        self.last_trace = request.trace;
        let mut req = RequestContext::new(request.trace);
        self.link.set(ctx.directory.clone(), request.trace);
        // A compaction that landed between requests goes in before this one starts (not part
        // of what a rollback of this request undoes).
        self.ahead.land(&mut self.context, ctx, &mut req);
        // A turn paused before a restart is finished first, outside what a rollback of this
        // request undoes: its calls may have run.
        self.finish_paused(ctx, req.trace.id()).await?;
        // So is a request a restart left in flight (durable steps): its caller is gone, so its
        // answer goes to the log and the bus (`steps.rs`).
        self.resume_in_flight(ctx, request.trace).await;
        // A request handled before (asked again under its id: a retry to this agent's new home
        // after its first one died) is answered from the log — also when it was the one just
        // resumed — and never run twice.
        if let Some(answer) = request
            .request_id
            .as_deref()
            .and_then(|id| self.journal.answer_of(id))
        {
            return answer;
        }
        req.mark(&self.context.conversation);
        let before = self.before_request();
        self.start_request(&request);
        let format = request.response_format.as_ref();
        self.journal
            .begin_request(format, request.request_id.clone());
        let outcome = self.run_turns(ctx, &mut req, format).await;
        self.close_request(outcome, &mut req, before)
    }

    async fn handle_job(&mut self, job: JobRequest, ctx: &AgentContext) -> Result<(), AgentError> {
        self.last_trace = job.trace();
        // A job is never rolled back: nothing marks it.
        let mut req = RequestContext::new(job.trace());
        match job.open::<LlmAgentJob>(&ctx.name)? {
            LlmAgentJob::Compact(focus, cancel, reply) => {
                let outcome = if self.context.conversation.len() < 2 {
                    Err(CompactionAskError::NothingToCompact)
                } else {
                    self.compact_unless_cancelled(focus, &cancel, ctx, &mut req)
                        .await
                };
                if outcome.is_ok() {
                    self.commit(Step::Changes);
                }
                reply.send(outcome);
            }
            LlmAgentJob::OpenScope(label, reply) => {
                self.scopes.open(label, self.context.conversation.next_id());
                reply.send(());
            }
            LlmAgentJob::CloseScope(CloseScope { prompt, model }, reply) => {
                let closed = self.close_scope(prompt, model, ctx, &req).await;
                if closed.is_ok() {
                    self.commit(Step::Changes);
                }
                reply.send(closed);
            }
            LlmAgentJob::Clear(reply) => reply.send(self.clear()),
            LlmAgentJob::SwitchSession(path, reply) => reply.send(self.switch_session(&path)),
            LlmAgentJob::ContextStats(reply) => {
                let tool_tokens = self.tool_tokens();
                let (in_flight, spend) = (self.ahead.in_flight(), self.spend.report());
                reply.send(self.context.stats(tool_tokens, in_flight, spend));
            }
            LlmAgentJob::Conversation(reply) => reply.send(ConversationCopy {
                conversation: self.context.conversation.clone(),
                archive: self.context.archive.clone(),
            }),
            LlmAgentJob::Pin(id, pinned, reply) => reply.send(self.set_pinned(id, pinned)),
            LlmAgentJob::SessionHealth(reply) => {
                reply.send(self.journal.behind());
            }
            LlmAgentJob::ResumeRequest(reply) => {
                reply.send(self.resume_in_flight(ctx, req.trace).await);
            }
        }
        Ok(())
    }

    /// A compaction working ahead is landed or cancelled (`work_ahead.rs`), and the session
    /// log keeps what landed.
    async fn stop(&mut self, ctx: &AgentContext) {
        let mut between = RequestContext::new(self.last_trace);
        self.ahead.stop(&mut self.context, ctx, &mut between).await;
        self.commit(Step::Changes);
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            conversation: self.context.conversation.clone(),
            state: BehaviorState::new(LlmAgentState {
                before_in_flight: self.journal.before_in_flight().cloned(),
                ..self.context.state()
            }),
        }
    }

    /// O(what changed): the new messages, the new ledger entries; the archive is shared.
    fn update_checkpoint(&self, checkpoint: &mut Checkpoint) {
        checkpoint.conversation.catch_up(&self.context.conversation);
        let Some(state) = checkpoint.state.get_mut::<LlmAgentState>() else {
            *checkpoint = self.checkpoint();
            return;
        };
        self.context.update_state(state);
        state.before_in_flight = self.journal.before_in_flight().cloned();
    }
}
