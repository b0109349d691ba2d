//! How this agent asks for a compaction and applies the answer — automatic, `/compact`, the
//! `compact` tool and the emergency before a model call all come here: the road itself —
//! routing, the span, the events, the tracker — is the compaction client's
//! (`compression/client.rs`); working ahead of the trigger is `work_ahead.rs`.

use troupe_protocol::CompactTrigger;
use troupe_runtime::AgentContext;

use crate::compression::client::{AppliedCompaction, CompactionAskError, can_compact};
use crate::compression::{CompactionCaller, CompactionRequest, InProcess, compact_and_apply};

use super::LlmAgent;
use super::request::RequestContext;

impl LlmAgent {
    /// At a turn boundary short of the limit, as the context check decides
    /// ([`ContextStep::WorkAhead`](troupe_compaction::context_check::ContextStep::WorkAhead):
    /// the request of `request_tokens`, messages and tools, reached the work-ahead threshold
    /// with no job in flight and no tool call open): start a compaction of the conversation as
    /// it is and go on (`work_ahead.rs`) — when there is something to compact and a compressor
    /// to do it.
    pub(super) fn work_ahead(
        &mut self,
        ctx: &AgentContext,
        request_tokens: usize,
        req: &RequestContext,
    ) {
        if self.context.conversation.len() < 2 || !can_compact(&ctx.directory) {
            return;
        }
        let request = self.compaction_request(CompactTrigger::Automatic, None, &ctx.name);
        self.ahead
            .start(request, request_tokens, &mut self.context, ctx, req);
    }

    /// Compact this conversation through the compaction client (`compression/client.rs`) —
    /// automatic, `/compact`, the `compact` tool and the emergency before a model call all come
    /// here — waiting for it, and apply the answer. An agent that works ahead and makes room
    /// at its limit ([`AtLimit::MakeRoom`](crate::AtLimit::MakeRoom): the automatic and the
    /// emergency compactions, which come only at the limit then) has it made on its own node
    /// without a model. A background compaction in flight is stale once this one changed the
    /// conversation, and is dropped at once.
    pub(super) async fn compact(
        &mut self,
        trigger: CompactTrigger,
        focus: Option<String>,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) -> Result<AppliedCompaction, CompactionAskError> {
        let make_room = self.context.check.makes_room()
            && matches!(
                trigger,
                CompactTrigger::Automatic | CompactTrigger::Emergency
            );
        self.compact_as(trigger, focus, make_room, ctx, req).await
    }

    /// [`LlmAgent::compact`], making room on the agent's own node without a model when
    /// `make_room` (as the context check decides: [`ContextStep::MakeRoom`]).
    pub(super) async fn compact_as(
        &mut self,
        trigger: CompactTrigger,
        focus: Option<String>,
        make_room: bool,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) -> Result<AppliedCompaction, CompactionAskError> {
        let mut request = self.compaction_request(trigger, focus, &ctx.name);
        request.in_process.make_room = make_room;
        let counter = self.context.counter.clone();
        let caller = CompactionCaller {
            directory: &ctx.directory,
            events: &ctx.events,
            trace: req.trace,
            counter: counter.as_ref(),
        };
        let applied = compact_and_apply(&caller, request, |compaction| {
            if compaction.changed() {
                self.ahead.rewritten(&format!(
                    "the conversation was compacted meanwhile ({trigger})"
                ));
            }
            self.context.apply(compaction, req)
        })
        .await;
        self.ahead.drop_stale(&mut self.context, ctx, req).await;
        applied
    }

    /// The compaction of this conversation as it is now.
    pub(super) fn compaction_request(
        &self,
        trigger: CompactTrigger,
        focus: Option<String>,
        agent: &str,
    ) -> CompactionRequest {
        CompactionRequest {
            focus,
            in_process: InProcess {
                agent_model: Some(self.spec.model.clone()),
                token_cache: Some(self.context.token_cache.clone()),
                agent_tools: self.tool_definitions(),
                hooks: self.spec.compaction.hooks.clone(),
                spend: Some(self.spend.clone()),
                make_room: false,
            },
            ..CompactionRequest::new(
                agent.to_string(),
                self.context.conversation.clone(),
                self.context.ledger.snapshot(),
                // Every request keeps room for its answer: the policy's base leaves it out.
                self.context.policy.clone(),
                trigger,
            )
        }
    }

    /// A manual compaction that `cancel` abandons while it waits for the compressor: the
    /// compressor's answer is then dropped and nothing of the conversation changed (it is only
    /// applied after that wait, with no await in between). The abandoned compaction announces
    /// its end and leaves the tracker as it is dropped (`compression/client.rs`).
    pub(super) async fn compact_unless_cancelled(
        &mut self,
        focus: Option<String>,
        cancel: &tokio_util::sync::CancellationToken,
        ctx: &AgentContext,
        job: &mut RequestContext,
    ) -> Result<AppliedCompaction, CompactionAskError> {
        tokio::select! {
            outcome = self.compact(CompactTrigger::Manual, focus, ctx, job) => outcome,
            () = cancel.cancelled() => Err(CompactionAskError::Cancelled),
        }
    }
}
