//! The context check after every model turn and tool batch (the one before every model call is
//! `precall.rs`), and how this agent asks for a compaction and applies the answer: the road
//! itself — routing, the span, the events, the tracker — is the compaction client's
//! (`compression/client.rs`); working ahead of the trigger is `work_ahead.rs`.

use std::collections::HashSet;

use troupe_compaction::context_check::{CheckPoint, ContextMeasure, ContextStep, Warning};
use troupe_compaction::{CompactTrigger, Compaction};
use troupe_runtime::{AgentContext, Event, MessageId, MessageKind};

use crate::compression::client::{AppliedCompaction, CompactError};
use crate::compression::{CompactionCaller, CompactionRequest, InProcess, compact_and_apply};

use super::LlmAgent;
use super::request::RequestContext;
use super::work_ahead::has_open_tool_calls;

impl LlmAgent {
    /// After each model turn and tool batch: take a background compaction that landed, then
    /// do what the context check decides ([`ContextCheck::decide`]: warn once per crossing of
    /// the warning, work ahead, join the job in flight and check again, compact or make room).
    /// Like the check before every model call, it measures the conversation and the tool
    /// definitions against the usable window (the window less the output reserve for the
    /// answer), so both compact at the same point.
    ///
    /// [`ContextCheck::decide`]: troupe_compaction::context_check::ContextCheck::decide
    pub(super) async fn check_context(&mut self, ctx: &AgentContext, req: &mut RequestContext) {
        // A snapshot is never taken, nor an answer spliced in, while a tool call is open.
        let open = has_open_tool_calls(self.context.conversation.messages());
        if !open {
            self.land_background(ctx, req);
        }
        // The request carries the tool definitions too: they count against the window.
        let tools = self.request_tool_tokens();
        // Far below every threshold, bounds settle it: the turn's new messages are tokenized
        // only once the conversation could be near one (and then once each, cached).
        let quiet = self.context.check.quiet_below(
            CheckPoint::AfterTurn,
            self.ahead.running(),
            self.ahead.retry_from(),
        );
        if quiet > tools
            && self.context.token_cache.certainly_below(
                self.context.counter.as_ref(),
                self.context.conversation.messages(),
                quiet - tools,
            )
        {
            self.context.warned = false;
            return;
        }
        let mut measure = self.measure(CheckPoint::AfterTurn, tools, open);
        let mut action = self.context.check.decide(&measure);
        if action.step == ContextStep::Join {
            self.join_background(ctx, req).await;
            measure = self.measure(CheckPoint::AfterTurn, tools, open);
            action = self.context.check.decide(&measure);
        }
        match action.warning {
            Warning::Keep => {}
            Warning::Rearm => self.context.warned = false,
            Warning::Say => {
                self.context.warned = true;
                ctx.events.publish(
                    Some(req.trace.id()),
                    Event::ContextWarning {
                        agent: ctx.name.clone(),
                        tokens: measure.tokens,
                        window: self.context.policy.context_window,
                    },
                );
            }
        }
        match action.step {
            ContextStep::GoOn | ContextStep::Join => {}
            ContextStep::WorkAhead => self.work_ahead(ctx, measure.tokens, req),
            ContextStep::Compact | ContextStep::MakeRoom => {
                let make_room = action.step == ContextStep::MakeRoom;
                let automatic =
                    self.compact_as(CompactTrigger::Automatic, None, make_room, ctx, req);
                if let Err(e) = automatic.await {
                    tracing::warn!(agent = %ctx.name, error = %e, "automatic compaction did not run");
                }
            }
        }
    }

    /// The request as the context check sees it at `point`: the conversation's tokens plus
    /// `tool_tokens`, and where working ahead and the warning stand.
    pub(super) fn measure(
        &self,
        point: CheckPoint,
        tool_tokens: usize,
        tool_call_open: bool,
    ) -> ContextMeasure {
        ContextMeasure {
            point,
            tokens: self.tokens() + tool_tokens,
            tool_tokens,
            job_in_flight: self.ahead.running(),
            tool_call_open,
            warned: self.context.warned,
            retry_from: self.ahead.retry_from(),
        }
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
    ) -> Result<AppliedCompaction, CompactError> {
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
    ) -> Result<AppliedCompaction, CompactError> {
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
            self.apply(compaction, req)
        })
        .await;
        self.drop_stale_background(ctx, req).await;
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

    /// Put a compaction's result in place of the conversation it was made from (nothing
    /// changes when it changed nothing) and report it with the summary it wrote.
    fn apply(&mut self, compaction: Compaction, req: &mut RequestContext) -> AppliedCompaction {
        let before: HashSet<MessageId> = self
            .context
            .conversation
            .messages()
            .iter()
            .map(|m| m.id)
            .collect();
        if compaction.changed() {
            req.keep_for_rollback(&self.context.conversation);
            compaction.apply_to(&mut self.context.conversation);
            self.context.archive.extend(&compaction.archive);
        }
        let summary = self
            .context
            .conversation
            .messages()
            .iter()
            .rev()
            .find(|m| m.kind == MessageKind::Summary && !before.contains(&m.id))
            .map(|m| m.text());
        self.context.last_compaction = Some(compaction.report.clone());
        self.context.warned = false;
        AppliedCompaction {
            report: compaction.report,
            summary,
        }
    }
}
