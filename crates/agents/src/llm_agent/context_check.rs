//! The context check, the agent's side: before every model call (`prepare_call`) and after
//! every model turn and tool batch (`check_context`) the agent measures its request and carries
//! out what [`ContextCheck::decide`] answers — the decision and its thresholds are the
//! compaction crate's (`troupe_compaction::context_check`).
//!
//! Before a model call, the first of a request included, a large user message, or a large
//! answer an agent relays, is measured before the model sees it.
//!
//! A request is its messages, its tool definitions and, beyond them, the room the answer needs
//! (the output reserve, [`CompactionSettings::output_reserve_for`]). The thresholds are
//! fractions of the usable window, the window less that reserve: when messages and tools reach
//! the trigger the conversation is compacted before the call — an agent that works ahead has it
//! compacted in the background past the trigger and waits only at the limit, when the request
//! would not fit the usable window (`work_ahead.rs`); when the three would not fit the window
//! even then, an emergency compaction runs (as after a provider's "context length exceeded",
//! without the round trip); a request that still cannot fit is refused with a
//! [`ContextOverflow`] that names what does not fit, and nothing is sent. A protected message
//! (the newest user message, say) too large to fit alone is refused before any compaction:
//! compaction never shrinks it. A model's answer that large never gets here: it is cut as it
//! arrives (`context/fit.rs`).
//!
//! [`CompactionSettings::output_reserve_for`]: crate::CompactionSettings::output_reserve_for
//! [`ContextCheck::decide`]: troupe_compaction::context_check::ContextCheck::decide

use troupe_compaction::context_check::{CheckPoint, ContextMeasure, ContextStep, Warning};
use troupe_protocol::CompactTrigger;
use troupe_protocol::Event;
use troupe_runtime::{AgentContext, ContextOverflow};

use super::LlmAgent;
use super::request::RequestContext;
use super::work_ahead::has_open_tool_calls;

impl LlmAgent {
    /// Before a model call: take a background compaction that landed, do what the context
    /// check decides (work ahead, join the job in flight and check again, compact or make
    /// room), and where the agent must compact refuse the call when the request cannot fit the
    /// window (see the module's documentation).
    pub(super) async fn prepare_call(
        &mut self,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) -> Result<(), ContextOverflow> {
        // Before a model call no tool call is open: a background compaction that landed goes
        // in now.
        self.ahead.land(&mut self.context, ctx, req);
        // Thresholds are of the usable window (the window less the output reserve), against
        // which the conversation and the tool definitions count.
        let quiet = self.context.check.quiet_below(
            CheckPoint::BeforeCall,
            self.ahead.running(),
            self.ahead.retry_from(),
        );
        // Far below the trigger (and the work-ahead threshold), bounds settle it without
        // tokenizing the new messages or the tool definitions.
        let fixed_bound = self.tool_tokens_bound();
        if fixed_bound < quiet
            && self.context.token_cache.certainly_below(
                self.context.counter.as_ref(),
                self.context.conversation.messages(),
                quiet - fixed_bound,
            )
        {
            return Ok(());
        }
        // The set just bounded is the last one seen: its exact count needs no new copy of the
        // definitions.
        let room = self.context.room(self.request_tool_tokens());
        let fixed = room.tool_tokens;
        let open = has_open_tool_calls(self.context.conversation.messages());
        let mut measure = self.measure(CheckPoint::BeforeCall, fixed, open);
        if self.context.check.at_trigger(measure.tokens) {
            self.context.refuse_protected_giant(room)?;
        }
        let mut action = self.context.check.decide(&measure);
        if action.step == ContextStep::Join {
            // Told to wait at the limit: the job in flight is joined first.
            self.ahead.join(&mut self.context, ctx, req).await;
            measure = self.measure(CheckPoint::BeforeCall, fixed, open);
            if !self.context.check.at_trigger(measure.tokens) {
                return Ok(());
            }
            action = self.context.check.decide(&measure);
        }
        match action.step {
            ContextStep::GoOn | ContextStep::Join => {}
            // Working ahead, past the threshold with room left: a compaction starts now, and
            // the call goes on.
            ContextStep::WorkAhead => self.work_ahead(ctx, measure.tokens, req),
            // Tool definitions alone past the trigger: no compaction brings the request under
            // it (the tools' own warning says so), so none runs before every call.
            ContextStep::Compact | ContextStep::MakeRoom => {
                let make_room = action.step == ContextStep::MakeRoom;
                let automatic =
                    self.compact_as(CompactTrigger::Automatic, None, make_room, ctx, req);
                if let Err(e) = automatic.await {
                    tracing::warn!(agent = %ctx.name, error = %e, "automatic compaction before the model call did not run");
                }
            }
        }
        // Only where the agent must compact (the trigger on the blocking road, the limit when it
        // works ahead) must the request also fit now.
        if !self.context.check.must_compact(measure.tokens, fixed) {
            return Ok(());
        }
        if self.tokens() + fixed + room.output_reserve > room.window {
            tracing::warn!(
                agent = %ctx.name,
                tokens = self.tokens() + room.tool_tokens,
                output_reserve = room.output_reserve,
                window = room.window,
                "the request would not fit the context window with room for the answer; emergency compaction"
            );
            if let Err(e) = self
                .compact(CompactTrigger::Emergency, None, ctx, req)
                .await
            {
                tracing::warn!(agent = %ctx.name, error = %e, "emergency compaction before the model call did not run");
            }
        }
        let tokens = self.tokens() + room.tool_tokens;
        if tokens + room.output_reserve > room.window {
            return Err(self.context.overflow(room, tokens));
        }
        Ok(())
    }

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
            self.ahead.land(&mut self.context, ctx, req);
        }
        // Far below every threshold, bounds settle it: the turn's new messages (and the tool
        // definitions, which the request carries and which count against the window) are
        // tokenized only once the conversation could be near one (and then once each, cached).
        let quiet = self.context.check.quiet_below(
            CheckPoint::AfterTurn,
            self.ahead.running(),
            self.ahead.retry_from(),
        );
        let tools_bound = self.request_tool_tokens_bound();
        if quiet > tools_bound
            && self.context.token_cache.certainly_below(
                self.context.counter.as_ref(),
                self.context.conversation.messages(),
                quiet - tools_bound,
            )
        {
            self.context.warned = false;
            return;
        }
        let tools = self.request_tool_tokens();
        let mut measure = self.measure(CheckPoint::AfterTurn, tools, open);
        let mut action = self.context.check.decide(&measure);
        if action.step == ContextStep::Join {
            self.ahead.join(&mut self.context, ctx, req).await;
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
}
