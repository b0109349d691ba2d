//! Tier 3: a segment of old turns becomes one structured summary, or (per-message mode) each
//! old user/assistant message is shortened on its own.
//!
//! Both name what they hide (`artifacts/hidden.rs`): a summary's ledger lists the artifacts of
//! everything it replaces, a shortened message lists those its short text leaves out.

use troupe_protocol::{ChatMessage, MessageId, MessageKind, Role};

use super::{CompactionSession, StepOutcome};
use crate::artifacts::ArtifactLedger;
use crate::artifacts::hidden::{unnamed, with_names};
use crate::error::Refusal;
use crate::markers::replaces_line;
use crate::pairing::{owners, tool_name};
use crate::policy::ARTIFACT_SHARE_PERCENT;
use crate::summary::fold::{FoldSpend, clip_to_tokens, fold_with_spend};
use crate::summary::{
    FileLists, ParsedSummary, Summarizer, SummarizerError, fit_summary, parse_summary_message,
    per_message_prompt, render_message, segment_prompt, summary_message_text,
};

/// The wrapping of one segment summary (see [`CompactionSession::segment_frame`]).
pub(crate) struct SegmentFrame {
    /// The previous summary inside the segment, by index, taken apart.
    previous: Option<(usize, ParsedSummary)>,
    files: FileLists,
    /// The artifact blocks, rendered to fit their share of the room left.
    artifacts: String,
    /// Every artifact of what the summary replaces, before the room was applied.
    ledger: ArtifactLedger,
    /// The input messages the summary stands for.
    roots: Vec<MessageId>,
}

impl SegmentFrame {
    /// The summary message with `body` inside this wrapping.
    pub(crate) fn message(&self, body: &str) -> ChatMessage {
        ChatMessage::user(summary_message_text(
            body,
            &self.files,
            &self.artifacts,
            &self.roots,
        ))
        .with_kind(MessageKind::Summary)
    }
}

/// What a segment frame was built from: its range and the session's state then. Every change to
/// the working conversation allocates an id, removes a message or changes the total, so a frame
/// whose key still matches is the frame [`CompactionSession::segment_frame`] would build now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameKey {
    range: (usize, usize),
    ends: (MessageId, MessageId),
    len: usize,
    total: usize,
    next_id: u64,
}

/// The frame the planner built to choose a segment, kept for the summary it then applies.
/// Building a frame reads every original the segment stands for and fits the artifact blocks
/// by counting trial renders, about half of a mechanical room made at an agent's limit; built
/// twice, it was the planner's and the summary's.
#[derive(Default)]
pub(crate) struct FrameMemo(std::sync::Mutex<Option<(FrameKey, SegmentFrame)>>);

impl FrameMemo {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(FrameKey, SegmentFrame)>> {
        // A poisoned memo holds a whole frame or none: either is safe to read.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The kept frame if it was built for `key`; the memo is empty afterwards.
    fn take(&self, key: FrameKey) -> Option<SegmentFrame> {
        self.slot()
            .take()
            .filter(|(kept, _)| *kept == key)
            .map(|(_, frame)| frame)
    }

    fn keep(&self, key: FrameKey, frame: SegmentFrame) {
        *self.slot() = Some((key, frame));
    }
}

/// Marks a message shortened in per-message mode.
const SHORTENED_PREFIX: &str = "[summarized]";

impl CompactionSession<'_> {
    /// Check a segment given by its first and last message; returns their indices.
    ///
    /// A segment must exist in order, hold no protected message, and keep every assistant
    /// message together with all of its tool results.
    pub(crate) fn check_segment(
        &self,
        start: MessageId,
        end: MessageId,
    ) -> Result<(usize, usize), Refusal> {
        let s = self.index_of(start)?;
        let e = self.index_of(end)?;
        if s > e {
            return Err(Refusal::ReversedRange { start, end });
        }
        if let Some(m) = self.messages[s..=e]
            .iter()
            .find(|m| self.protected.contains(m.id))
        {
            let reason = self
                .protected
                .reason(m.id)
                .unwrap_or(crate::protection::ProtectionReason::Recent);
            return Err(Refusal::RangeIncludesProtected {
                start,
                end,
                id: m.id,
                reason,
            });
        }
        let owners = owners(&self.messages);
        for (i, owner) in owners.iter().enumerate() {
            let Some(owner) = *owner else { continue };
            let result_inside = (s..=e).contains(&i);
            let call_inside = (s..=e).contains(&owner);
            if result_inside != call_inside {
                return Err(Refusal::RangeCutsToolPair {
                    start,
                    end,
                    assistant: self.messages[owner].id,
                    result: self.messages[i].id,
                });
            }
        }
        Ok((s, e))
    }

    /// Summarize the messages `start..=end` into one structured summary message (the
    /// `compress_conversation_segment` tool). `focus` (else the session's) is
    /// passed to the summarizer. A `<summary>` message inside the segment is merged as the
    /// previous summary; file lists come from the ledger plus that summary's lists.
    ///
    /// On any refusal — including a summarizer failure or a summary no smaller than the
    /// segment — the conversation is unchanged.
    pub async fn compress_segment(
        &mut self,
        start: MessageId,
        end: MessageId,
        focus: Option<String>,
        summarizer: &dyn Summarizer,
    ) -> Result<StepOutcome, Refusal> {
        let (s, e) = self.check_segment(start, end)?;
        self.refuse_if_under_target()?;

        let frame = self.frame_memo.take(self.frame_key(s, e));
        let frame = frame.unwrap_or_else(|| self.segment_frame(s, e));
        let previous = &frame.previous;
        let owners = owners(&self.messages);
        let blocks: Vec<String> = (s..=e)
            .filter(|i| previous.as_ref().is_none_or(|(p, _)| p != i))
            .filter(|i| self.messages[*i].kind != MessageKind::DisplayOnly)
            .map(|i| render_message(&self.messages[i], tool_name(&self.messages, owners[i], i)))
            .collect();
        if blocks.is_empty() {
            return Err(Refusal::NothingToSummarize { start, end });
        }
        let focus = focus.or_else(|| self.request.focus.clone());
        let summary_message = |body: &str| frame.message(body);
        // Sized to the room left under the target, measured on the message's own wrapping.
        let budget = self.summary_budget(s..=e, &summary_message(""));
        let previous_body = previous.as_ref().map(|(_, p)| p.body.as_str());
        // The agent's own model first continues the agent's cached conversation; the separate
        // prompt (folded over chunks when the segment is too large) is what every other
        // summarizer gets, and what the agent's model gets when that answer was unusable.
        let separate = segment_prompt(&blocks.join("\n"), previous_body, focus.as_deref(), budget);
        let body = match self
            .summarize_inline(s, e, &separate, focus.as_deref(), summarizer)
            .await
        {
            Some(body) => body,
            None => {
                let mut spend = FoldSpend::default();
                let folded = fold_with_spend(
                    &blocks,
                    previous_body,
                    focus.as_deref(),
                    budget,
                    summarizer,
                    self.counter,
                    &mut spend,
                )
                .await;
                self.usage.calls += spend.calls;
                self.usage.input_tokens += spend.input_tokens;
                self.usage.output_tokens += spend.output_tokens;
                folded
                    .map_err(|source| Refusal::Summarizer {
                        start,
                        end,
                        cause: source,
                    })?
                    .summary
            }
        };

        let mut summary = summary_message(&fit_summary(&body, budget, self.counter));
        summary.id = self.allocate_id();
        let new_tokens = self.count(&summary);
        let old_tokens: usize = self.tokens[s..=e].iter().sum();
        if new_tokens >= old_tokens {
            return Err(Refusal::NoGain {
                id: start,
                before: old_tokens,
                after: new_tokens,
            });
        }
        self.record_dropped(unnamed(&frame.ledger, &summary.text(), self.counter));
        self.counts.segment_summaries += 1;
        self.counts.summarized_messages += e - s + 1;
        let roots = frame.roots;
        Ok(self.commit_replacement(s..=e, summary, new_tokens, roots))
    }

    fn frame_key(&self, s: usize, e: usize) -> FrameKey {
        FrameKey {
            range: (s, e),
            ends: (self.messages[s].id, self.messages[e].id),
            len: self.messages.len(),
            total: self.total,
            next_id: self.next_id,
        }
    }

    /// The tokens of the bare wrapping (an empty body) of a summary of `s..=e`, its frame kept
    /// for the summary the planner plans with it.
    pub(crate) fn planned_frame_tokens(&self, s: usize, e: usize) -> usize {
        let frame = self.segment_frame(s, e);
        let tokens = self.count(&frame.message(""));
        self.frame_memo.keep(self.frame_key(s, e), frame);
        tokens
    }

    /// What a summary of `s..=e` is wrapped in: the previous summary it merges (if any), the
    /// file lists, the artifact ledger and the ids it replaces.
    pub(crate) fn segment_frame(&self, s: usize, e: usize) -> SegmentFrame {
        let mut previous: Option<(usize, ParsedSummary)> = None;
        if self.request.detect_previous_summary {
            previous = (s..=e).find_map(|i| {
                let m = &self.messages[i];
                (m.role != Role::Tool)
                    .then(|| parse_summary_message(&m.text()))
                    .flatten()
                    .map(|p| (i, p))
            });
        }
        let call_ids = self.messages[s..=e]
            .iter()
            .flat_map(|m| m.calls().iter().map(|c| c.id.as_str()));
        let mut files = FileLists::from_ledger_calls(self.ledger, call_ids);
        if let Some((_, summary)) = &previous {
            files.union(&summary.files);
        }
        let roots = self.roots_of(s..=e);
        // The previous summary's artifacts are older than the segment's: merge them first.
        let mut artifacts = previous
            .as_ref()
            .map(|(_, p)| p.artifacts.clone())
            .unwrap_or_default();
        artifacts.merge(&self.artifacts_behind(s..=e));
        let mut frame = SegmentFrame {
            previous,
            files,
            artifacts: String::new(),
            ledger: ArtifactLedger::default(),
            roots,
        };
        // The room the aim leaves once everything outside the segment and the bare wrapping
        // (tags, file lists, marker: kept whatever the room) stay: the body gets a third of it
        // (at most its own bound), the blocks the rest, up to a share of the target. Names are
        // what an engineer looks up; a long body is what they skim. The aim is the target
        // unless the protected messages leave a summary no room under it.
        let target = self.policy.target_tokens();
        let replaced: usize = self.tokens[s..=e].iter().sum();
        let bare = self.count(&frame.message(""));
        let room = self
            .aim
            .saturating_sub(self.total.saturating_sub(replaced))
            .saturating_sub(bare);
        let body = self.policy.summary_max_tokens.min(room / 3);
        let allowance = room
            .saturating_sub(body)
            .min(target * ARTIFACT_SHARE_PERCENT / 100);
        frame.artifacts = artifacts.render_within(allowance, self.counter);
        frame.ledger = artifacts;
        frame
    }

    /// Per-message mode: shorten each unprotected user message above the policy's user bound
    /// and each assistant message above the assistant bound in `start..=end`, one summarizer
    /// call each. Tool calls, tool results and ids of other messages are untouched.
    ///
    /// Returns the combined outcome; stops at the first summarizer failure (messages already
    /// shortened stay shortened — each replacement is valid on its own).
    pub async fn compress_messages_individually(
        &mut self,
        start: MessageId,
        end: MessageId,
        summarizer: &dyn Summarizer,
    ) -> Result<StepOutcome, Refusal> {
        let (s, e) = self.check_segment(start, end)?;
        self.refuse_if_under_target()?;
        let candidates: Vec<MessageId> = self.messages[s..=e]
            .iter()
            .filter(|m| {
                matches!(m.role, Role::User | Role::Assistant) && m.kind == MessageKind::Normal
            })
            .map(|m| m.id)
            .collect();
        let mut replaced = Vec::new();
        let (mut before, mut after) = (0, 0);
        let mut new_id = None;
        for id in candidates {
            match self.shorten_message(id, summarizer).await {
                Ok(Some(step)) => {
                    replaced.extend(step.replaced);
                    before += step.tokens_before;
                    after += step.tokens_after;
                    new_id = step.new_id;
                }
                Ok(None) => {}
                Err(source) => {
                    if replaced.is_empty() {
                        return Err(Refusal::Summarizer {
                            start,
                            end,
                            cause: source,
                        });
                    }
                    self.fallbacks
                        .push(format!("per-message summarizing stopped: {source}"));
                    break;
                }
            }
        }
        if replaced.is_empty() {
            return Err(Refusal::NothingToSummarize { start, end });
        }
        Ok(self.outcome(replaced, new_id, before, after))
    }

    /// Shorten one message if it is above its role's bound and the result is smaller.
    async fn shorten_message(
        &mut self,
        id: MessageId,
        summarizer: &dyn Summarizer,
    ) -> Result<Option<StepOutcome>, SummarizerError> {
        let Ok(index) = self.index_of(id) else {
            return Ok(None);
        };
        let message = &self.messages[index];
        let limit = match message.role {
            Role::User => self.policy.per_message_user_tokens,
            _ => self.policy.per_message_assistant_tokens,
        };
        let text = message.text();
        if self.counter.count(&text) <= limit {
            return Ok(None);
        }
        let prompt = per_message_prompt(message.role, &text, limit);
        let request = prompt.request_tokens(self.counter);
        if request > summarizer.context_window() {
            // Too long for the summarizer in one piece: leave it for segment summaries.
            return Ok(None);
        }
        self.usage.calls += 1;
        self.usage.input_tokens += request - limit;
        let answer = summarizer.summarize(prompt).await?;
        self.usage.output_tokens += self.counter.count(&answer);
        let answer = answer.trim();
        if answer.is_empty() {
            return Err(SummarizerError::Empty);
        }
        let short = if self.counter.count(answer) > limit {
            clip_to_tokens(answer, limit, self.counter)
        } else {
            answer.to_string()
        };
        let roots = self.roots_of(index..=index);
        let body = format!("{SHORTENED_PREFIX} {}", short.trim());
        let mut replacement = self.messages[index]
            .with_text(body.clone())
            .with_kind(MessageKind::Summary);
        // At most half of what it shortens, as a stub's list.
        let named = self.names_hidden_by(index, &replacement, self.tokens[index] / 2);
        replacement.set_text(format!(
            "{}\n{}",
            with_names(&body, &named.blocks),
            replaces_line(&roots)
        ));
        replacement.id = self.allocate_id();
        let new_tokens = self.count(&replacement);
        if new_tokens >= self.tokens[index] {
            return Ok(None);
        }
        self.record_dropped(named.dropped);
        self.counts.per_message_summarized += 1;
        Ok(Some(self.commit_replacement(
            index..=index,
            replacement,
            new_tokens,
            roots,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(next_id: u64) -> FrameKey {
        FrameKey {
            range: (1, 4),
            ends: (MessageId(2), MessageId(5)),
            len: 9,
            total: 1_000,
            next_id,
        }
    }

    fn frame(artifacts: &str) -> SegmentFrame {
        SegmentFrame {
            previous: None,
            files: FileLists::default(),
            artifacts: artifacts.to_string(),
            ledger: ArtifactLedger::default(),
            roots: vec![MessageId(2)],
        }
    }

    /// A kept frame comes back only for the state it was built in, and only once: after any
    /// change (here an id allocated) the summary builds its own.
    #[test]
    fn a_kept_frame_is_given_only_for_the_state_it_was_built_in() {
        let memo = FrameMemo::default();
        memo.keep(key(10), frame("<paths>\na.rs\n</paths>"));
        assert!(
            memo.take(key(11)).is_none(),
            "a changed session builds anew"
        );
        assert!(memo.take(key(10)).is_none(), "a mismatch empties the memo");
        memo.keep(key(10), frame("<paths>\na.rs\n</paths>"));
        let kept = memo.take(key(10)).map(|f| f.artifacts);
        assert_eq!(kept.as_deref(), Some("<paths>\na.rs\n</paths>"));
        assert!(memo.take(key(10)).is_none(), "taken once");
    }
}
