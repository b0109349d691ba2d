//! What fits the window: a request, a protected message, an answer.
//!
//! A request is its messages, its tool definitions and, beyond them, the room the answer needs
//! (the output reserve). A protected message (the newest user message, say) too large to fit
//! the window alone is refused before any compaction, since compaction never shrinks it; a
//! request that still cannot fit after compaction is refused with a [`ContextOverflow`] that
//! names what does not fit (its largest message when that cannot fit alone).
//!
//! A model's answer too large for the window even alone is cut as it arrives. Kept whole it would be protected (one of the newest messages) and refused before every later
//! call — and unlike a user's message, nobody can send it again in smaller parts. So the
//! conversation keeps its head and tail, cut like an oversized tool output, and the whole
//! answer goes to the archive, where `recall` (offered from then on) and `expand` find it by
//! the id the cut names (`troupe_compaction::Archive::push_cut_answer`). The caller still gets the
//! whole answer: only what the model sees again is cut.

use troupe_compaction::invariants::ProtectedSet;
use troupe_protocol::{ChatMessage, MessageId};
use troupe_runtime::ContextOverflow;

use super::Context;

/// The sizes a request is measured by.
#[derive(Debug, Clone, Copy)]
pub(in crate::llm_agent) struct Room {
    pub(in crate::llm_agent) tool_tokens: usize,
    pub(in crate::llm_agent) output_reserve: usize,
    pub(in crate::llm_agent) window: usize,
}

impl Context {
    /// The room a request with `tool_tokens` of tool definitions is measured by.
    pub(in crate::llm_agent) fn room(&self, tool_tokens: usize) -> Room {
        Room {
            tool_tokens,
            output_reserve: self.policy.output_reserve,
            window: self.policy.context_window,
        }
    }

    /// Push the model's `answer`: whole when it fits the window alone (with the system prompt,
    /// the tool definitions' `tool_tokens` and the output reserve), else cut to the tool-output limit (at most
    /// half that room, so the rest of the conversation keeps the other half).
    ///
    /// `tools_bound` bounds the definitions' tokens (`ToolTokens::bound`):
    /// they are counted exactly only when the bounds do not settle it.
    pub(in crate::llm_agent) fn push_answer(
        &mut self,
        answer: ChatMessage,
        tools_bound: usize,
        agent: &str,
    ) -> MessageId {
        // Most answers are shorter in bytes than the room in tokens, and the system prompt and
        // the tool definitions too: no tokenizing then (the next context check counts the
        // answer once, by id).
        if let Some(room) = self.room_bound_for_one_message(tools_bound)
            && self
                .counter
                .count_message_upper_bound(&answer)
                .is_some_and(|tokens| tokens <= room)
        {
            return self.conversation.push(answer);
        }
        let tool_tokens = self
            .tool_tokens
            .last(self.counter.as_ref())
            .unwrap_or(tools_bound);
        let room = self.room_for_one_message(tool_tokens);
        let within = |tokens: usize| tokens <= room;
        let tokens = self.counter.count_message(&answer);
        if within(tokens) {
            return self.conversation.push(answer);
        }
        let limit = self.policy.tool_output_limit_tokens.min(room / 2);
        tracing::warn!(
            agent = %agent,
            tokens,
            room,
            limit,
            "the answer cannot fit the context window even alone; kept cut, archived whole"
        );
        self.archive
            .push_cut_answer(&mut self.conversation, answer, tokens, limit)
    }

    /// A protected message that cannot fit the window even alone: refused at once, since no
    /// compaction touches it. Messages are copied only when one is that large.
    pub(in crate::llm_agent) fn refuse_protected_giant(
        &self,
        room: Room,
    ) -> Result<(), ContextOverflow> {
        let giants = self.messages_too_large_alone(room);
        if giants.is_empty() {
            return Ok(());
        }
        let plain: Vec<ChatMessage> = self
            .conversation
            .messages()
            .iter()
            .map(|m| ChatMessage::clone(m))
            .collect();
        let protected = ProtectedSet::compute(&plain, self.policy.protected_recent);
        match giants
            .into_iter()
            .find(|giant| protected.contains(plain[giant.0].id))
        {
            Some(giant) => Err(self.too_large(giant, room)),
            None => Ok(()),
        }
    }

    /// The most tokens a message after the system prompt may take and still fit the window
    /// alone, by the rule [`Context::messages_too_large_alone`] refuses by.
    pub(in crate::llm_agent) fn room_for_one_message(&self, tool_tokens: usize) -> usize {
        let messages = self.conversation.messages();
        let system = match (self.conversation.system_prompt(), messages.first()) {
            (Some(_), Some(first)) => self.token_cache.count_message(self.counter.as_ref(), first),
            _ => 0,
        };
        self.room_beside(system, tool_tokens)
    }

    /// No more than [`Context::room_for_one_message`] with `tools_bound` of tool definitions,
    /// found without tokenizing: the system prompt by its bound (`None` when the counter
    /// promises none).
    fn room_bound_for_one_message(&self, tools_bound: usize) -> Option<usize> {
        let messages = self.conversation.messages();
        let system = match (self.conversation.system_prompt(), messages.first()) {
            (Some(_), Some(first)) => self.counter.count_message_upper_bound(first)?,
            _ => 0,
        };
        Some(self.room_beside(system, tools_bound))
    }

    /// The window less `system` tokens of system prompt and what one message shares it with
    /// besides ([`Context::alone_overhead`] of `tool_tokens`).
    fn room_beside(&self, system: usize, tool_tokens: usize) -> usize {
        let fixed = self.alone_overhead(tool_tokens);
        self.policy.context_window.saturating_sub(system + fixed)
    }

    /// What one message shares the window with besides the system prompt: the tool
    /// definitions (`tool_tokens`), the output reserve and the reply priming.
    fn alone_overhead(&self, tool_tokens: usize) -> usize {
        tool_tokens + self.policy.output_reserve + self.counter.overhead().reply_priming
    }

    /// Each message (index and tokens) that does not fit the window alone — with the system
    /// prompt, the tool definitions, the output reserve and the reply priming.
    fn messages_too_large_alone(&self, room: Room) -> Vec<(usize, usize)> {
        let counts = self
            .token_cache
            .count_shared(self.counter.as_ref(), self.conversation.messages());
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
        if self.conversation.system_prompt().is_some() {
            per_message.first().copied().unwrap_or(0)
        } else {
            0
        }
    }

    /// The refusal for message `index` of `tokens` tokens.
    fn too_large(&self, (index, tokens): (usize, usize), room: Room) -> ContextOverflow {
        let messages = self.conversation.messages();
        let message = &messages[index];
        let system_tokens = if index == 0 || self.conversation.system_prompt().is_none() {
            0
        } else {
            self.token_cache
                .count_message(self.counter.as_ref(), &messages[0])
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
    pub(in crate::llm_agent) fn overflow(&self, room: Room, tokens: usize) -> ContextOverflow {
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
