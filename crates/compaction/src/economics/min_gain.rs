//! The minimum-gain rule: an automatic compaction (or the agent's own `compact` tool) that would
//! re-bill more than it saves over the turns until the next one is declined before it runs —
//! but never when the window needs it.
//!
//! The receipt is estimated from the plan, before any tier runs:
//! - tokens after: the session's aim, or what is left when everything freeable is freed, if
//!   that is more;
//! - the cached prefix kept: the leading messages no tier rewrites (protected, or already a
//!   summary or a stub);
//! - the summarizer's input: what masking cannot take out (a lower bound, so the rule errs
//!   towards compacting);
//! - expected turns: the room under the trigger over the mean tokens a turn added
//!   (as [`super::expected_turns`] counts them).
//!
//! Conversations under 8,192 tokens are not weighed (see [`MIN_WEIGHED_TOKENS`]).
//!
//! **The window needs it** when the conversation, grown by the mean turns it grows before the
//! answer lands (one for a blocking compaction, more for one worked ahead: [`Lead`]), plus the
//! largest room troupe keeps for an answer (a quarter of the window: the output reserve's cap),
//! would not fit the window: then the compaction runs whatever it costs. A lead not known yet
//! always needs it. Manual and emergency
//! compactions are never declined (the caller applies the rule to rate-limited triggers only).

use troupe_protocol::{MessageKind, Role};

use super::Lead;
use super::model::CostModel;
use crate::session::{CompactionSession, is_masked};
use troupe_tokens::TokenCounter;

/// The smallest conversation the rule weighs: below it the cache's economics are noise (nothing
/// under 1,024 tokens is cached, and hits come in 128-token steps), the stakes are a few
/// thousand token-equivalents at most, and a compaction runs as it always did.
pub(crate) const MIN_WEIGHED_TOKENS: usize = 8 * super::MIN_CACHED_TOKENS;

/// The share of the window the rule assumes is kept for the answer: the most any agent keeps
/// (`CompactionSettings::output_reserve_for` caps the reserve at a quarter of the window).
const LARGEST_RESERVE_SHARE: f64 = 0.25;

/// A compaction's receipt as the plan promises it, before it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PlannedGain {
    pub(crate) tokens_before: usize,
    pub(crate) tokens_after: usize,
    pub(crate) cached_prefix_kept: usize,
    /// The summarizer's input tokens (0 when masking and truncating reach the aim).
    pub(crate) summarizer_input: usize,
    /// The mean tokens one turn added to the conversation.
    pub(crate) per_turn: f64,
    pub(crate) expected_turns: f64,
    pub(crate) context_window: usize,
    /// The turns until the answer is applied.
    pub(crate) lead: Lead,
}

impl PlannedGain {
    /// The plan of `session`, whose next turns are counted to `trigger_tokens`; `summarizes`
    /// says whether a summarizer is at hand, `lead` when its answer is applied.
    pub(crate) fn of(
        session: &CompactionSession<'_>,
        counter: &dyn TokenCounter,
        summarizes: bool,
        lead: Lead,
    ) -> PlannedGain {
        let status = session.verify_target();
        let messages = session.messages();
        let protected = session.protected();
        let before = status.current;
        let after = status
            .target
            .max(before.saturating_sub(session.freeable_tokens()))
            .min(before);
        let untouched = |m: &&troupe_protocol::ChatMessage| {
            protected.contains(m.id)
                || m.kind == MessageKind::Summary
                || (m.role == Role::Tool && is_masked(m))
        };
        let kept: usize = messages
            .iter()
            .take_while(untouched)
            .map(|m| counter.count_message(m))
            .sum();
        // Masking takes a tool result down to a stub of about this many tokens.
        const STUB_TOKENS: usize = 24;
        // One pass over the messages after the system prompt: what they add up to, and what
        // masking could take out of them.
        let (mut grown, mut maskable) = (0, 0);
        for m in messages.iter().skip_while(|m| m.role.is_instructions()) {
            let tokens = counter.count_message(m);
            grown += tokens;
            if m.role == Role::Tool && !protected.contains(m.id) && !is_masked(m) {
                maskable += tokens.saturating_sub(STUB_TOKENS);
            }
        }
        let summarizer_input = if summarizes {
            before.saturating_sub(maskable).saturating_sub(after)
        } else {
            0
        };
        let turns = messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let policy = session.policy();
        // As `expected_turns` counts them, from the same pass.
        let per_turn = grown as f64 / turns.max(1) as f64;
        let expected_turns = if turns == 0 || grown == 0 {
            1.0
        } else {
            (policy.trigger_tokens().saturating_sub(after) as f64 / per_turn).max(1.0)
        };
        PlannedGain {
            tokens_before: before,
            tokens_after: after,
            cached_prefix_kept: kept.min(after),
            summarizer_input,
            per_turn,
            expected_turns,
            context_window: policy.context_window,
            lead,
        }
    }

    /// Whether the request, grown by the mean turns until the answer lands and with the
    /// largest answer room, would not fit the window (always, when the lead is unknown).
    pub(crate) fn window_needs_it(&self) -> bool {
        let Some(turns) = self.lead.turns() else {
            return true;
        };
        let window = self.context_window as f64;
        self.tokens_before as f64 + self.per_turn * turns > window * (1.0 - LARGEST_RESERVE_SHARE)
    }

    /// What the compaction saves over the expected turns, what it re-bills, and the net, under
    /// `model` (the receipt's formula).
    pub(crate) fn net(&self, model: &CostModel) -> (f64, usize, f64) {
        let rates = model.rates();
        let saved = (self.tokens_before - self.tokens_after) as f64
            * rates.cached_read
            * self.expected_turns;
        let rebilled = self.tokens_after - self.cached_prefix_kept;
        let net = saved
            - rebilled as f64 * (model.fresh_prefix_rate() - rates.cached_read)
            - self.summarizer_input as f64 * rates.input;
        (saved, rebilled, net)
    }

    /// `Some(why)` when the rule declines the compaction: never for a conversation under
    /// [`MIN_WEIGHED_TOKENS`], nor when the window needs it.
    pub(crate) fn declines(&self, model: &CostModel) -> Option<String> {
        if self.tokens_before < MIN_WEIGHED_TOKENS || self.window_needs_it() {
            return None;
        }
        let (saved, rebilled, net) = self.net(model);
        (net < 0.0).then(|| {
            format!(
                "declined: would re-bill {rebilled} tokens to save {saved:.0} over ~{:.1} turns \
                 (net {net:.0} uncached-token equivalents at {model} rates); the window does not \
                 need it yet",
                self.expected_turns
            )
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn plan(before: usize, after: usize, kept: usize, per_turn: f64, turns: f64) -> PlannedGain {
        PlannedGain {
            tokens_before: before,
            tokens_after: after,
            cached_prefix_kept: kept,
            summarizer_input: 0,
            per_turn,
            expected_turns: turns,
            context_window: 32_000,
            lead: Lead::NextTurn,
        }
    }

    #[test]
    fn a_compaction_that_rebills_more_than_it_saves_is_declined() {
        // Saves 9000 × 0.1 × 2 = 1800; re-bills 11_900 × 0.9 = 10_710.
        let p = plan(21_000, 12_000, 100, 3_000.0, 2.0);
        let why = p.declines(&CostModel::openai()).unwrap();
        assert!(
            why.starts_with("declined: would re-bill 11900 tokens to save 1800 over ~2.0 turns"),
            "{why}"
        );
        // Over many turns it pays: 9000 × 0.1 × 20 = 18_000 > 10_710.
        assert_eq!(
            plan(21_000, 12_000, 100, 3_000.0, 20.0).declines(&CostModel::openai()),
            None
        );
    }

    #[test]
    fn a_small_conversation_is_not_weighed() {
        let p = PlannedGain {
            context_window: 20_000,
            ..plan(8_000, 4_000, 0, 100.0, 1.0)
        };
        assert!(p.net(&CostModel::openai()).2 < 0.0 && !p.window_needs_it());
        assert_eq!(p.declines(&CostModel::openai()), None);
    }

    #[test]
    fn the_window_needs_it_one_mean_turn_from_the_largest_reserve() {
        // 22_000 + 2_001 > 24_000 (the window less a quarter): never declined.
        let p = plan(22_000, 12_000, 100, 2_001.0, 1.0);
        assert!(p.window_needs_it());
        assert_eq!(p.declines(&CostModel::openai()), None);
        let p = plan(22_000, 12_000, 100, 2_000.0, 1.0);
        assert!(!p.window_needs_it());
        assert!(p.declines(&CostModel::openai()).is_some());
    }

    #[test]
    fn a_compaction_worked_ahead_is_judged_where_it_lands() {
        // 18_000 + 2_000 < 24_000: one turn ahead the window has room, so it is declined…
        let next = plan(18_000, 12_000, 100, 2_000.0, 1.0);
        assert!(next.declines(&CostModel::openai()).is_some());
        // …but an answer that lands four turns later must start now (18_000 + 8_000 > 24_000),
        // and one whose lead is not known yet is never declined.
        for lead in [Lead::Turns(4), Lead::Unknown] {
            let ahead = PlannedGain { lead, ..next };
            assert!(ahead.window_needs_it(), "{lead:?}");
            assert_eq!(ahead.declines(&CostModel::openai()), None, "{lead:?}");
        }
        // Three turns still leave room (18_000 + 6_000 is not over 24_000): the rule weighs it
        // as any other.
        let ahead = PlannedGain {
            lead: Lead::Turns(3),
            ..next
        };
        assert!(ahead.declines(&CostModel::openai()).is_some());
    }
}
