//! The context check before every model call, the first of a request included: a large user
//! message, or a large answer an agent relays, is measured before the model sees it.
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
//! arrives (`oversized_answer.rs`).
//!
//! [`CompactionSettings::output_reserve_for`]: crate::CompactionSettings::output_reserve_for

use troupe_compaction::CompactTrigger;
use troupe_compaction::invariants::ProtectedSet;
use troupe_runtime::{AgentContext, ChatMessage};

use super::LlmAgent;
use super::request::RequestContext;
use super::work_ahead::has_open_tool_calls;
use troupe_compaction::context_check::{CheckPoint, ContextStep};
use troupe_runtime::ContextOverflow;

/// The sizes a request is measured by.
#[derive(Debug, Clone, Copy)]
struct Room {
    tool_tokens: usize,
    output_reserve: usize,
    window: usize,
}

impl LlmAgent {
    /// Tokens every request keeps free for the model's answer (the policy's: its thresholds
    /// are fractions of the window less it).
    pub(super) fn output_reserve(&self) -> usize {
        self.context.policy.output_reserve
    }

    /// Before a model call: take a background compaction that landed, do what the context
    /// check decides (work ahead, join the job in flight and check again, compact or make
    /// room), and where the agent must compact refuse the call when the request cannot fit the
    /// window (see the module's documentation).
    pub(super) async fn prepare_call(
        &mut self,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) -> Result<(), ContextOverflow> {
        let room = Room {
            tool_tokens: self.tool_tokens(),
            output_reserve: self.output_reserve(),
            window: self.context.policy.context_window,
        };
        // Before a model call no tool call is open: a background compaction that landed goes
        // in now.
        self.land_background(ctx, req);
        // Thresholds are of the usable window (the window less the output reserve), against
        // which the conversation and the tool definitions count.
        let fixed = room.tool_tokens;
        let quiet = self.context.check.quiet_below(
            CheckPoint::BeforeCall,
            self.ahead.running(),
            self.ahead.retry_from(),
        );
        // Far below the trigger (and the work-ahead threshold), bounds settle it without
        // tokenizing the new messages.
        if fixed < quiet
            && self.context.token_cache.certainly_below(
                self.context.counter.as_ref(),
                self.context.conversation.messages(),
                quiet - fixed,
            )
        {
            return Ok(());
        }
        let open = has_open_tool_calls(self.context.conversation.messages());
        let mut measure = self.measure(CheckPoint::BeforeCall, fixed, open);
        if self.context.check.at_trigger(measure.tokens) {
            self.refuse_protected_giant(room)?;
        }
        let mut action = self.context.check.decide(&measure);
        if action.step == ContextStep::Join {
            // Told to wait at the limit: the job in flight is joined first.
            self.join_background(ctx, req).await;
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
            return Err(self.overflow(room, tokens));
        }
        Ok(())
    }

    /// A protected message that cannot fit the window even alone: refused at once, since no
    /// compaction touches it. Messages are copied only when one is that large.
    fn refuse_protected_giant(&self, room: Room) -> Result<(), ContextOverflow> {
        let giants = self.messages_too_large_alone(room);
        if giants.is_empty() {
            return Ok(());
        }
        let plain: Vec<ChatMessage> = self
            .context
            .conversation
            .messages()
            .iter()
            .map(|m| ChatMessage::clone(m))
            .collect();
        let protected = ProtectedSet::compute(&plain, self.context.policy.protected_recent);
        match giants
            .into_iter()
            .find(|giant| protected.contains(plain[giant.0].id))
        {
            Some(giant) => Err(self.too_large(giant, room)),
            None => Ok(()),
        }
    }

    /// The most tokens a message after the system prompt may take and still fit the window
    /// alone, by the rule [`LlmAgent::messages_too_large_alone`] refuses by.
    pub(super) fn room_for_one_message(&self) -> usize {
        let messages = self.context.conversation.messages();
        let system = match (self.context.conversation.system_prompt(), messages.first()) {
            (Some(_), Some(first)) => self
                .context
                .token_cache
                .count_message(self.context.counter.as_ref(), first),
            _ => 0,
        };
        // The definitions of the request this answer came from, counted when it was sent: no
        // copy of them for every answer.
        let fixed = self.alone_overhead(self.request_tool_tokens());
        self.context
            .policy
            .context_window
            .saturating_sub(system + fixed)
    }

    /// What one message shares the window with besides the system prompt: the tool
    /// definitions (`tool_tokens`), the output reserve and the reply priming.
    fn alone_overhead(&self, tool_tokens: usize) -> usize {
        tool_tokens + self.output_reserve() + self.context.counter.overhead().reply_priming
    }

    /// Each message (index and tokens) that does not fit the window alone — with the system
    /// prompt, the tool definitions, the output reserve and the reply priming.
    fn messages_too_large_alone(&self, room: Room) -> Vec<(usize, usize)> {
        let counts = self.context.token_cache.count_shared(
            self.context.counter.as_ref(),
            self.context.conversation.messages(),
        );
        let system = self.system_tokens(&counts.per_message);
        let fixed = self.alone_overhead(room.tool_tokens);
        counts
            .per_message
            .iter()
            .enumerate()
            .filter(|&(i, &tokens)| {
                let system = if i == 0 { 0 } else { system };
                tokens + system + fixed > room.window
            })
            .map(|(i, &tokens)| (i, tokens))
            .collect()
    }

    /// The system prompt's tokens (0 without one), from the conversation's per-message counts.
    fn system_tokens(&self, per_message: &[usize]) -> usize {
        if self.context.conversation.system_prompt().is_some() {
            per_message.first().copied().unwrap_or(0)
        } else {
            0
        }
    }

    /// The refusal for message `index` of `tokens` tokens.
    fn too_large(&self, (index, tokens): (usize, usize), room: Room) -> ContextOverflow {
        let messages = self.context.conversation.messages();
        let message = &messages[index];
        let system_tokens = if index == 0 || self.context.conversation.system_prompt().is_none() {
            0
        } else {
            self.context
                .token_cache
                .count_message(self.context.counter.as_ref(), &messages[0])
        };
        ContextOverflow::MessageTooLarge {
            role: message.role,
            id: message.id,
            position: index + 1,
            of: messages.len(),
            tokens,
            system_tokens,
            tool_tokens: room.tool_tokens,
            output_reserve: room.output_reserve,
            window: room.window,
        }
    }

    /// Why a request of `tokens` tokens (messages and tools) is refused after compaction: its
    /// largest message when that cannot fit alone, else the conversation as a whole.
    fn overflow(&self, room: Room, tokens: usize) -> ContextOverflow {
        let largest = self
            .messages_too_large_alone(room)
            .into_iter()
            .max_by_key(|&(_, tokens)| tokens);
        match largest {
            Some(giant) => self.too_large(giant, room),
            None => ContextOverflow::Conversation {
                tokens,
                tool_tokens: room.tool_tokens,
                output_reserve: room.output_reserve,
                window: room.window,
            },
        }
    }
}
