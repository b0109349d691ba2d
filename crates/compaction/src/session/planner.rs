//! The deterministic planner: cheapest tier first, stop at the target.
//!
//! Tier 1 truncates the biggest oversized tool output first; tier 2 removes display-only
//! messages, then masks tool results oldest first; tier 3 summarizes the oldest unprotected
//! segment, just large enough to reach the target. It reaches the target whenever the
//! operations can; it is what the compression agent falls back on when its model is weak.

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};
use troupe_protocol::{ChatMessage, MessageId, MessageKind, Role};

use super::{
    CompactionSession, StepOutcome, ToolResultStrategy, is_masked, summarizable, text_starts_with,
};
use crate::error::Refusal;
use crate::pairing::owners;
use crate::summary::Summarizer;

/// Tokens a summary message adds beyond its body: tags, file lists, the marker.
pub(crate) const SUMMARY_FRAME_ESTIMATE: usize = 128;
/// Fewest tokens a summary body is asked to fit: about what the six headings with one short
/// Goal item take. Below it a summary would say nothing, so the target is missed instead.
pub(crate) const SUMMARY_BUDGET_FLOOR: usize = 96;
/// Tokens kept free when a body is joined to its wrapping: BPE counts of joined text can differ
/// slightly from the sum of the parts.
const JOIN_SLACK_TOKENS: usize = 4;

/// The next operation the planner would apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum PlannedStep {
    /// Tier 1 on the biggest oversized tool output.
    Truncate {
        /// The tool result.
        id: MessageId,
        /// Its tokens.
        tokens: usize,
    },
    /// Tier 2: drop a display-only message.
    RemoveDisplayOnly {
        /// The message.
        id: MessageId,
    },
    /// Tier 2 on the oldest unmasked tool result.
    Mask {
        /// The tool result.
        id: MessageId,
        /// Its tokens.
        tokens: usize,
    },
    /// Tier 3, per-message mode, over the oldest unprotected run.
    SummarizeMessages {
        /// First message.
        start: MessageId,
        /// Last message.
        end: MessageId,
    },
    /// Tier 3 over the oldest unprotected segment.
    SummarizeSegment {
        /// First message.
        start: MessageId,
        /// Last message.
        end: MessageId,
    },
}

/// What a planner run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannerOutcome {
    /// Operations applied.
    pub applied: usize,
    /// Operations refused (and not retried).
    pub refused: usize,
    /// Whether the target is met.
    pub reached: bool,
    /// Why the planner stopped.
    pub stopped: String,
}

impl CompactionSession<'_> {
    /// The next step toward the target, or `None` when the target is met or nothing is left.
    pub fn plan_next_step(&self) -> Option<PlannedStep> {
        self.plan_next_step_for(true)
    }

    /// [`CompactionSession::plan_next_step`]; with `summarizing` false (no summarizer to run a
    /// tier-3 step) a tier-3 step is proposed without choosing its segment's end, which means
    /// rendering and counting the segment's wrapping — a third of a large tier 1–2 compaction.
    /// Such a step is never applied, only reported as needing a summarizer, so which segment
    /// it names does not matter; whether there is one does, and is decided the same way.
    fn plan_next_step_for(&self, summarizing: bool) -> Option<PlannedStep> {
        if self.verify_target().reached {
            return None;
        }
        // One pass finds the candidate of every cheap tier: the planner runs once per step, so
        // its scan is the hot loop of a large compaction.
        let limit = self.policy.tool_output_limit_tokens;
        let mut biggest: Option<(MessageId, usize)> = None;
        let mut display_only: Option<MessageId> = None;
        let mut oldest_unmasked: Option<(MessageId, usize)> = None;
        for (m, &tokens) in self.messages.iter().zip(&self.tokens) {
            if m.kind == MessageKind::DisplayOnly {
                if display_only.is_none() && !self.protected.contains(m.id) {
                    display_only = Some(m.id);
                }
                continue;
            }
            if m.role != Role::Tool {
                continue;
            }
            // What this result could still be a candidate for, by what it says of itself: the
            // lookups below are for those alone (past the oldest unmasked result, only outputs
            // over the limit are).
            let may_truncate = tokens > limit
                && m.kind != MessageKind::CompressedStub
                && biggest.is_none_or(|(_, t)| tokens > t);
            let may_mask = oldest_unmasked.is_none() && !is_masked(m);
            // A pinned tool result is protected: no tier touches it.
            if !(may_truncate || may_mask) || self.protected.contains(m.id) {
                continue;
            }
            if may_truncate && !self.no_gain.contains(&(m.id, ToolResultStrategy::Truncate)) {
                biggest = Some((m.id, tokens));
            }
            if may_mask && !self.no_gain.contains(&(m.id, ToolResultStrategy::Mask)) {
                oldest_unmasked = Some((m.id, tokens));
            }
        }
        if let Some((id, tokens)) = biggest {
            return Some(PlannedStep::Truncate { id, tokens });
        }
        if let Some(id) = display_only {
            return Some(PlannedStep::RemoveDisplayOnly { id });
        }
        if let Some((id, tokens)) = oldest_unmasked {
            return Some(PlannedStep::Mask { id, tokens });
        }
        if self.summaries_failed {
            return None;
        }
        let runs = self.summarizable_runs();
        if self.request.per_message
            && !self.per_message_done
            && let Some(&(s, e)) = runs.first()
        {
            return Some(PlannedStep::SummarizeMessages {
                start: self.messages[s].id,
                end: self.messages[e].id,
            });
        }
        // `next_segment` declines a run only for a segment that was refused before; with none
        // refused, the oldest run has a segment, whatever its end.
        if !summarizing
            && self.failed_segments.is_empty()
            && let Some(&(s, e)) = runs.first()
        {
            return Some(PlannedStep::SummarizeSegment {
                start: self.messages[s].id,
                end: self.messages[e].id,
            });
        }
        self.next_segment(&runs)
            .map(|(s, e)| PlannedStep::SummarizeSegment {
                start: self.messages[s].id,
                end: self.messages[e].id,
            })
    }

    /// Runs of consecutive messages a summary may replace (no protected message, no tool
    /// result of a protected call), that hold something besides summaries and display-only
    /// messages. Oldest first.
    fn summarizable_runs(&self) -> Vec<(usize, usize)> {
        let owners = owners(&self.messages);
        let eligible = |i: usize| summarizable(&self.messages, &owners, &self.protected, i);
        let mut runs = Vec::new();
        let mut start = None;
        for i in 0..=self.messages.len() {
            match (i < self.messages.len() && eligible(i), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    runs.push((s, i - 1));
                    start = None;
                }
                _ => {}
            }
        }
        runs.retain(|&(s, e)| {
            self.messages[s..=e]
                .iter()
                .any(|m| m.kind != MessageKind::DisplayOnly && !text_starts_with(m, "<summary>"))
        });
        runs
    }

    /// The oldest segment worth summarizing: the shortest prefix of the oldest run that frees
    /// enough to reach the target (ending where no tool result follows), else the whole run.
    fn next_segment(&self, runs: &[(usize, usize)]) -> Option<(usize, usize)> {
        let needed = self.total.saturating_sub(self.aim);
        for &(s, e) in runs {
            // Room for the summary and its wrapping (file lists and artifact blocks can take
            // thousands of tokens): the wrapping of the whole run bounds any prefix's, so a
            // prefix chosen with it leaves the summary its full budget.
            let frame = self.planned_frame_tokens(s, e);
            let reserve = self.policy.summary_max_tokens + frame.max(SUMMARY_FRAME_ESTIMATE);
            let mut end = e;
            let mut sum = 0;
            for i in s..=e {
                sum += self.tokens[i];
                if sum >= needed + reserve && self.ends_cleanly(i, e) {
                    end = i;
                    break;
                }
            }
            let tried = |end: usize| {
                self.failed_segments
                    .contains(&(self.messages[s].id, self.messages[end].id))
            };
            if !tried(end) {
                return Some((s, end));
            }
            if end != e && !tried(e) {
                return Some((s, e));
            }
        }
        None
    }

    /// The tokens a summary body replacing the messages `range` may take: the session's aim
    /// (the target, or the raised aim that keeps the summary its room) minus everything that
    /// stays — the messages outside `range` and `wrapping` (the summary message with an empty
    /// body: tags, file lists, marker, message framing). At most the policy's summary bound,
    /// never below [`SUMMARY_BUDGET_FLOOR`].
    pub(crate) fn summary_budget(
        &self,
        range: RangeInclusive<usize>,
        wrapping: &ChatMessage,
    ) -> usize {
        let replaced: usize = self.tokens[range].iter().sum();
        let staying =
            self.total.saturating_sub(replaced) + self.count(wrapping) + JOIN_SLACK_TOKENS;
        let ceiling = self.policy.summary_max_tokens.max(SUMMARY_BUDGET_FLOOR);
        self.aim
            .saturating_sub(staying)
            .clamp(SUMMARY_BUDGET_FLOOR, ceiling)
    }

    /// Whether a segment may end at `i` without separating a call from its results.
    fn ends_cleanly(&self, i: usize, run_end: usize) -> bool {
        i == run_end
            || self.messages[i + 1..=run_end]
                .iter()
                .find(|m| m.kind != MessageKind::DisplayOnly)
                .is_none_or(|m| m.role != Role::Tool)
    }

    /// Apply planned steps until the target is met or nothing is left. Without a summarizer
    /// only tiers 1–2 run. Refusals are remembered and not retried; a summarizer failure ends
    /// tier 3 and is recorded as a fallback for the report.
    pub async fn finish_deterministically(
        &mut self,
        summarizer: Option<&dyn Summarizer>,
    ) -> PlannerOutcome {
        let mut outcome = PlannerOutcome::default();
        // Every step either shrinks the conversation or is remembered as refused, so this bound
        // is never reached in practice; it guards against a planner bug looping forever.
        let max_steps = self.messages.len() * 4 + 16;
        while outcome.applied + outcome.refused < max_steps {
            let Some(step) = self.plan_next_step_for(summarizer.is_some()) else {
                break;
            };
            let result = self.apply_step(&step, summarizer).await;
            match result {
                Ok(Some(_)) => outcome.applied += 1,
                Ok(None) => break,
                Err(_) => outcome.refused += 1,
            }
        }
        let status = self.verify_target();
        outcome.reached = status.reached;
        outcome.stopped = if status.reached && self.raised_aim().is_some() {
            "raised aim reached (the target is out of reach)".to_string()
        } else if status.reached {
            "target reached".to_string()
        } else {
            self.fallbacks
                .last()
                .cloned()
                .unwrap_or_else(|| "nothing left to compress".to_string())
        };
        outcome
    }

    /// Apply one planned step; `Ok(None)` when it needs a summarizer and there is none.
    ///
    /// A refused step is remembered, so [`CompactionSession::plan_next_step`] does not propose
    /// it again; a summarizer failure ends tier 3 for this session and is recorded as a
    /// fallback for the report.
    pub async fn apply_step(
        &mut self,
        step: &PlannedStep,
        summarizer: Option<&dyn Summarizer>,
    ) -> Result<Option<StepOutcome>, Refusal> {
        let result = self.try_step(step, summarizer).await;
        if let Err(refusal) = &result {
            self.remember_refusal(step, refusal);
        }
        result
    }

    async fn try_step(
        &mut self,
        step: &PlannedStep,
        summarizer: Option<&dyn Summarizer>,
    ) -> Result<Option<StepOutcome>, Refusal> {
        let applied = match *step {
            PlannedStep::Truncate { id, .. } => {
                self.compress_tool_result(id, ToolResultStrategy::Truncate)?
            }
            PlannedStep::Mask { id, .. } => {
                self.compress_tool_result(id, ToolResultStrategy::Mask)?
            }
            PlannedStep::RemoveDisplayOnly { id } => self.remove_display_only(id)?,
            PlannedStep::SummarizeMessages { start, end } => {
                let Some(summarizer) = summarizer else {
                    return Ok(self.no_summarizer());
                };
                self.per_message_done = true;
                self.compress_messages_individually(start, end, summarizer)
                    .await?
            }
            PlannedStep::SummarizeSegment { start, end } => {
                let Some(summarizer) = summarizer else {
                    return Ok(self.no_summarizer());
                };
                let focus = self.request.focus.clone();
                self.compress_segment(start, end, focus, summarizer).await?
            }
        };
        Ok(Some(applied))
    }

    fn no_summarizer(&mut self) -> Option<StepOutcome> {
        self.fallbacks
            .push("no summarizer was given, so tier 3 (summaries) could not run".to_string());
        None
    }

    fn remember_refusal(&mut self, step: &PlannedStep, refusal: &Refusal) {
        match *step {
            PlannedStep::Truncate { id, .. } => {
                self.no_gain.insert((id, ToolResultStrategy::Truncate));
            }
            PlannedStep::Mask { id, .. } => {
                self.no_gain.insert((id, ToolResultStrategy::Mask));
            }
            PlannedStep::RemoveDisplayOnly { .. } => {
                // Cannot be refused for a display-only message the planner chose; stop tier 2
                // from choosing it again by treating it as a failed segment of one.
            }
            PlannedStep::SummarizeMessages { .. } => {
                self.per_message_done = true;
                if let Refusal::Summarizer { cause: source, .. } = refusal {
                    self.summaries_failed = true;
                    self.fallbacks
                        .push(format!("the summarizer failed ({source})"));
                }
            }
            PlannedStep::SummarizeSegment { start, end } => {
                self.failed_segments.insert((start, end));
                match refusal {
                    Refusal::Summarizer { cause: source, .. } => {
                        self.summaries_failed = true;
                        self.fallbacks
                            .push(format!("the summarizer failed ({source})"));
                    }
                    other => self
                        .fallbacks
                        .push(format!("a summary was not applied: {other}")),
                }
            }
        }
    }
}
