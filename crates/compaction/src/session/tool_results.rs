//! Tiers 1 and 2 on single messages: truncate or mask a tool result, drop a display-only one.
//!
//! A truncated output and a stub name what they hide (`artifacts/hidden.rs`): the cut middle's
//! and the masked output's error lines, error types and test names, listed after what is kept.

use troupe_protocol::{ChatMessage, MessageId, MessageKind, Role};

use super::{CompactionSession, StepOutcome, ToolResultStrategy, is_masked};
use crate::artifacts::hidden::{Named, with_names};
use crate::error::Refusal;
use crate::markers::replaces_line;
use crate::mask::stub_text;
use crate::truncate::{text_tokens_within, truncate_to_tokens};

/// Bytes of the `[replaces mN]` line a stub carries.
const MARKER_BYTES: usize = 16;
/// A stub or a cut output lists what it hides within this share of the output it replaces
/// (a half), so it frees at least about half; an output whose names need more is not masked
/// or cut, and keeps them where they are (a summary, which may drop names for room and says
/// so, can still take it). The bound does not depend on the window: a result replaced at a
/// wide window lists what it would list at a narrow one, and tiers 1–2 never lose a name.
const NAMES_ROOM_DIVISOR: usize = 2;

impl CompactionSession<'_> {
    /// What tier 2 can bring the tool result at `index` down to: the tokens of its mask stub,
    /// or its own tokens when a stub would not be smaller, could not list what it hides, or it
    /// is masked already.
    pub(crate) fn masked_tokens(&self, index: usize) -> usize {
        let tokens = self.tokens[index];
        if is_masked(&self.messages[index]) {
            return tokens;
        }
        let roots = [self.messages[index].id];
        // Unassigned: counted, never cached under the original's id.
        let stub = self
            .stub_body(index)
            .and_then(|body| self.naming_all(index, &body, &roots, MessageId(0)));
        match stub {
            Ok(stub) => self.count(&stub).min(tokens),
            Err(_) => tokens,
        }
    }

    /// The first line(s) of the mask stub of the tool result at `index`: the ledger's line for
    /// its call, or a line count, exit code and first error. Refused when it is no shorter than
    /// the output.
    fn stub_body(&self, index: usize) -> Result<String, Refusal> {
        let message = &self.messages[index];
        let owner = crate::pairing::owner_of(&self.messages, index);
        let tool = crate::pairing::tool_name(&self.messages, owner, index);
        let call_id = message.tool_call_id.as_deref().unwrap_or_default();
        let text = message.text_cow();
        let stub = stub_text(tool, call_id, &text, self.ledger);
        // A stub no shorter than the output cannot save tokens; skip counting it.
        if stub.len() + MARKER_BYTES >= text.len() {
            let tokens = self.tokens[index];
            return Err(Refusal::NoGain {
                id: message.id,
                before: tokens,
                after: tokens,
            });
        }
        Ok(stub)
    }

    /// The replacement of the tool result at `index` that keeps `body` (a mask stub, or the
    /// head and tail of a cut), with every name the output held that nothing else names, and
    /// the marker line naming `roots`; with id `id`. Refused when it cannot list them all in
    /// half the output's tokens.
    fn naming_all(
        &self,
        index: usize,
        body: &str,
        roots: &[MessageId],
        id: MessageId,
    ) -> Result<ChatMessage, Refusal> {
        let room = self.tokens[index] / NAMES_ROOM_DIVISOR;
        let (replacement, named) = self.keeping_names(index, body, roots, id, room);
        if !named.dropped.is_empty() {
            return Err(Refusal::NamesDoNotFit {
                id: self.messages[index].id,
                names: named.dropped.len(),
                room,
            });
        }
        Ok(replacement)
    }

    /// The replacement of the tool result at `index` that keeps `body`: the body, the blocks
    /// naming what it hides within `room` tokens, the marker line naming `roots`; with id
    /// `id`. And the hidden artifacts its list left out for room.
    fn keeping_names(
        &self,
        index: usize,
        body: &str,
        roots: &[MessageId],
        id: MessageId,
        room: usize,
    ) -> (ChatMessage, Named) {
        let mut replacement = self.messages[index]
            .with_text(body)
            .with_kind(MessageKind::CompressedStub);
        replacement.id = id;
        let named = self.names_hidden_by(index, &replacement, room);
        replacement.set_text(format!(
            "{}\n{}",
            with_names(body, &named.blocks),
            replaces_line(roots)
        ));
        (replacement, named)
    }

    /// Shrink the tool result `id` by `strategy` (the `compress_tool_result` tool).
    ///
    /// Refused (with nothing changed) if `id` is unknown, protected, not a tool result, already
    /// compressed that way, below the truncation limit (for `Truncate`), if a stub could not
    /// list the names it hides (for `Mask`), or if the replacement would not be smaller.
    pub fn compress_tool_result(
        &mut self,
        id: MessageId,
        strategy: ToolResultStrategy,
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
        let already_cut = message.kind == MessageKind::CompressedStub;
        if is_masked(message) || (already_cut && strategy == ToolResultStrategy::Truncate) {
            return Err(Refusal::AlreadyCompressed { id });
        }
        let body = match strategy {
            ToolResultStrategy::Truncate => {
                let limit = self.policy.tool_output_limit_tokens;
                if tokens <= limit {
                    return Err(Refusal::BelowTruncationLimit { id, tokens, limit });
                }
                let keep = text_tokens_within(limit);
                truncate_to_tokens(&message.text_cow(), tokens, keep).ok_or(Refusal::NoGain {
                    id,
                    before: tokens,
                    after: tokens,
                })?
            }
            ToolResultStrategy::Mask => self.stub_body(index)?,
        };
        let roots = self.roots_of(index..=index);
        let new_id = self.allocate_id();
        let replacement = self.naming_all(index, &body, &roots, new_id)?;
        let new_tokens = self.count(&replacement);
        if new_tokens >= tokens {
            return Err(Refusal::NoGain {
                id,
                before: tokens,
                after: new_tokens,
            });
        }
        match strategy {
            ToolResultStrategy::Truncate => self.counts.truncated += 1,
            ToolResultStrategy::Mask => self.counts.masked += 1,
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
