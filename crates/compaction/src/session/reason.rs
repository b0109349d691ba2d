//! Why a compaction ended where it did, in the words its report gives: the target reached or
//! not needed, or what made it unreachable (the protected and pinned messages, a summary's
//! room under a raised aim, a summarizer that failed).

use troupe_protocol::RaisedAim;

use super::CompactionSession;
use crate::protection::ProtectedSet;

impl CompactionSession<'_> {
    /// Why the session ends where it does, in words for the report.
    pub(super) fn reason(&self) -> String {
        let target = self.policy.target_tokens();
        let (before, after) = (self.tokens_before, self.total);
        if before <= target {
            return format!(
                "no compaction needed: {before} tokens is within the target of {target}"
            );
        }
        if after <= target {
            return format!("target reached: {before} → {after} tokens (target {target})");
        }
        if let Some(raised) = self.raised_aim() {
            return self.raised_aim_reason(&raised);
        }
        let protected_tokens = self.protected_tokens();
        if protected_tokens >= target {
            return format!(
                "target unreachable: the protected messages alone take {protected_tokens} tokens{}, above the target of {target}; best effort {before} → {after} tokens",
                self.pinned_note()
            );
        }
        if let Some(fallback) = self.fallbacks.last() {
            return format!(
                "target unreachable: {fallback}; kept the tier 1–2 result, {before} → {after} tokens (target {target})"
            );
        }
        format!(
            "target unreachable: nothing left that can be compressed further; best effort {before} → {after} tokens (target {target})"
        )
    }

    /// ` (N pinned messages take P of them)` when pins are part of what blocks the target:
    /// the words that tell a user to unpin something, not to lower the target.
    fn pinned_note(&self) -> String {
        match ProtectedSet::pinned_tokens(&self.messages, &self.tokens) {
            (0, _) => String::new(),
            (1, tokens) => format!(" (1 pinned message takes {tokens} of them)"),
            (n, tokens) => format!(" ({n} pinned messages take {tokens} of them)"),
        }
    }

    /// Tokens the protected messages take.
    fn protected_tokens(&self) -> usize {
        self.messages
            .iter()
            .zip(&self.tokens)
            .filter(|(m, _)| self.protected.contains(m.id))
            .map(|(_, t)| t)
            .sum()
    }

    /// The reason when the session aimed above the target: what was fixed, the room kept, the
    /// aim, and whether even the aim was missed.
    fn raised_aim_reason(&self, raised: &RaisedAim) -> String {
        let target = self.policy.target_tokens();
        let (before, after) = (self.tokens_before, self.total);
        let fixed = raised.fixed_tokens;
        let pinned = self.pinned_note();
        let why = if fixed >= target {
            format!(
                "the protected messages alone take {fixed} tokens{pinned}, above the target of {target}"
            )
        } else {
            format!(
                "the protected messages take {fixed} tokens{pinned}, leaving less than the {} tokens a summary needs under the target of {target}",
                self.policy.min_summary_room_tokens()
            )
        };
        let margin = (crate::policy::UNREACHABLE_TARGET_MARGIN * 100.0).round();
        let kept = if raised.aim_tokens < fixed.saturating_add(raised.room_tokens) {
            format!(
                "so the summary and its ledger got {} of their {} tokens of room: the aim of {} tokens is capped at the trigger less a margin of {margin}% of the window",
                raised.aim_tokens.saturating_sub(fixed),
                raised.room_tokens,
                raised.aim_tokens
            )
        } else {
            format!(
                "so the summary and its ledger kept their room of {} tokens instead of being squeezed: aimed at {} tokens (capped at {}, the trigger less a margin of {margin}% of the window)",
                raised.room_tokens, raised.aim_tokens, raised.ceiling_tokens
            )
        };
        if before <= raised.aim_tokens {
            return format!(
                "target unreachable: {why}; the summary and its ledger keep their room of {} tokens, so the aim is {} tokens (at most {}, the trigger less a margin of {margin}% of the window) and the conversation's {before} tokens are within it: nothing was compacted",
                raised.room_tokens, raised.aim_tokens, raised.ceiling_tokens
            );
        }
        let missed = if after <= raised.aim_tokens {
            String::new()
        } else if let Some(fallback) = self.fallbacks.last() {
            format!("; the aim was missed too: {fallback}")
        } else {
            "; the aim was missed too: nothing left that can be compressed further".to_string()
        };
        format!("target unreachable: {why}, {kept}; {before} → {after} tokens{missed}")
    }
}
