//! Tiers 1 and 2 on single messages: truncate or mask a tool result, drop a display-only one.

use troupe_runtime::{MessageId, MessageKind, Role};

use super::{CompactionSession, CompressionStrategy, StepOutcome, is_masked};
use crate::error::Refusal;
use crate::markers::replaces_line;
use crate::mask::stub_text;
use crate::truncate::{text_tokens_within, truncate_to_tokens};

/// Bytes of the `[replaces mN]` line a stub carries.
const MARKER_BYTES: usize = 16;

impl CompactionSession<'_> {
    /// What tier 2 can bring the tool result at `index` down to: the tokens of its mask stub,
    /// or its own tokens when a stub would not be smaller (or it is masked already).
    pub(crate) fn masked_tokens(&self, index: usize) -> usize {
        let message = &self.messages[index];
        let tokens = self.tokens[index];
        if is_masked(message) {
            return tokens;
        }
        let owner = crate::pairing::owner_of(&self.messages, index);
        let tool = crate::pairing::tool_name(&self.messages, owner, index);
        let call_id = message.tool_call_id.as_deref().unwrap_or_default();
        let stub = stub_text(tool, call_id, &message.text(), self.ledger);
        let mut replacement = message.clone().with_kind(MessageKind::CompressedStub);
        replacement.set_text(format!(
            "{}\n{}",
            stub.trim_end(),
            replaces_line(&[message.id])
        ));
        // Unassigned: counted, never cached under the original's id.
        replacement.id = MessageId(0);
        self.count(&replacement).min(tokens)
    }

    /// Shrink the tool result `id` by `strategy` (the `compress_tool_result` tool).
    ///
    /// Refused (with nothing changed) if `id` is unknown, protected, not a tool result, already
    /// compressed that way, below the truncation limit (for `Truncate`), or if the replacement
    /// would not be smaller.
    pub fn compress_tool_result(
        &mut self,
        id: MessageId,
        strategy: CompressionStrategy,
    ) -> Result<StepOutcome, Refusal> {
        let index = self.index_of(id)?;
        self.refuse_protected(id)?;
        let message = &self.messages[index];
        if message.role != Role::Tool {
            return Err(Refusal::NotToolResult {
                id,
                role: message.role,
            });
        }
        self.refuse_if_under_target()?;
        let tokens = self.tokens[index];
        let body = match strategy {
            CompressionStrategy::Truncate => {
                if message.kind == MessageKind::CompressedStub || is_masked(message) {
                    return Err(Refusal::AlreadyCompressed { id });
                }
                let limit = self.policy.tool_output_limit_tokens;
                if tokens <= limit {
                    return Err(Refusal::BelowTruncationLimit { id, tokens, limit });
                }
                let keep = text_tokens_within(limit);
                truncate_to_tokens(&message.text(), tokens, keep).ok_or(Refusal::NoGain {
                    id,
                    before: tokens,
                    after: tokens,
                })?
            }
            CompressionStrategy::Mask => {
                if is_masked(message) {
                    return Err(Refusal::AlreadyCompressed { id });
                }
                let owner = crate::pairing::owner_of(&self.messages, index);
                let tool = crate::pairing::tool_name(&self.messages, owner, index);
                let call_id = message.tool_call_id.as_deref().unwrap_or_default();
                let text = message.text();
                let stub = stub_text(tool, call_id, &text, self.ledger);
                // A stub no shorter than the output cannot save tokens; skip counting it.
                if stub.len() + MARKER_BYTES >= text.len() {
                    return Err(Refusal::NoGain {
                        id,
                        before: tokens,
                        after: tokens,
                    });
                }
                stub
            }
        };
        let roots = self.roots_of(index..=index);
        let mut replacement = message.clone().with_kind(MessageKind::CompressedStub);
        replacement.set_text(format!("{}\n{}", body.trim_end(), replaces_line(&roots)));
        replacement.id = self.allocate_id();
        let new_tokens = self.count(&replacement);
        if new_tokens >= tokens {
            return Err(Refusal::NoGain {
                id,
                before: tokens,
                after: new_tokens,
            });
        }
        match strategy {
            CompressionStrategy::Truncate => self.counts.truncated += 1,
            CompressionStrategy::Mask => self.counts.masked += 1,
        }
        Ok(self.commit_replacement(index..=index, replacement, new_tokens, roots))
    }

    /// Remove the display-only message `id` (tier 2; it is never sent to a model anyway).
    pub fn remove_display_only(&mut self, id: MessageId) -> Result<StepOutcome, Refusal> {
        let index = self.index_of(id)?;
        self.refuse_protected(id)?;
        if self.messages[index].kind != MessageKind::DisplayOnly {
            return Err(Refusal::NotDisplayOnly { id });
        }
        self.refuse_if_under_target()?;
        self.counts.display_only_removed += 1;
        Ok(self.commit_removal(index))
    }
}
