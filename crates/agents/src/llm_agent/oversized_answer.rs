//! A model's answer too large for the context window even alone, cut as it arrives.
//!
//! Kept whole it would be protected (one of the newest messages) and refused before every later
//! call — and unlike a user's message, nobody can send it again in smaller parts. So the
//! conversation keeps its head and tail, cut like an oversized tool output, and the whole
//! answer goes to the archive, where `recall` (offered from then on) and `expand` find it by
//! the id the cut names (`troupe_compaction::Archive::push_cut_answer`). The caller still gets the
//! whole answer: only what the model sees again is cut.

use troupe_runtime::{ChatMessage, MessageId};

use super::LlmAgent;

impl LlmAgent {
    /// Push the model's `answer`: whole when it fits the window alone (with the system prompt,
    /// the tool definitions and the output reserve), else cut to the tool-output limit (at most
    /// half that room, so the rest of the conversation keeps the other half).
    pub(super) fn push_answer(&mut self, answer: ChatMessage) -> MessageId {
        let room = self.room_for_one_message();
        // Most answers are shorter in bytes than the room in tokens: no tokenizing then (the
        // next budget check counts it once, by id).
        let within = |tokens: usize| tokens <= room;
        if self
            .context
            .counter
            .count_message_upper_bound(&answer)
            .is_some_and(within)
        {
            return self.context.conversation.push(answer);
        }
        let tokens = self.context.counter.count_message(&answer);
        if within(tokens) {
            return self.context.conversation.push(answer);
        }
        let limit = self.context.policy.tool_output_limit_tokens.min(room / 2);
        tracing::warn!(
            agent = %self.spec.name,
            tokens,
            room,
            limit,
            "the answer cannot fit the context window even alone; kept cut, archived whole"
        );
        self.context
            .archive
            .push_cut_answer(&mut self.context.conversation, answer, tokens, limit)
    }
}
