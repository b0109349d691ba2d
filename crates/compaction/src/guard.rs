//! The anti-thrash guard: automatic compaction waits until it can free enough new tokens.
//!
//! A compaction that could not reach its target leaves a conversation that is still over the
//! trigger; without a guard the next turn triggers again, frees nothing, and repeats (Codex
//! #40213: 48 attempts in 76 minutes). The guard remembers how much was still freeable after
//! the last attempt and allows the next automatic one only once at least
//! [`ContextPolicy::min_freeable_tokens`] more have accumulated.
//!
//! An attempt that reached its target leaves nothing to thrash on: the conversation is below
//! the trigger (the target always is) and triggers again only once it has grown back. What it
//! left freeable is no baseline then — it is material the target did not need — and counting
//! it would hold the next compaction back until the conversation is at the window, which is
//! where an agent working ahead would have to wait for it.

use serde::{Deserialize, Serialize};

use crate::policy::ContextPolicy;
use troupe_protocol::CompactionReport;

/// Memory of the last compaction attempt, kept by whoever triggers compactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrashGuard {
    /// Freeable tokens left by the last attempt (`None`: no attempt yet).
    pub freeable_after_last: Option<usize>,
}

impl ThrashGuard {
    /// A guard with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether an automatic compaction may run now that `freeable_now` tokens are freeable;
    /// `Err` says why not.
    pub fn allows(&self, freeable_now: usize, policy: &ContextPolicy) -> Result<(), String> {
        let baseline = self.freeable_after_last.unwrap_or(0);
        let needed = baseline + policy.min_freeable_tokens;
        if freeable_now >= needed {
            Ok(())
        } else if baseline == 0 {
            Err(format!(
                "not enough to free: {freeable_now} tokens are freeable, an automatic compaction needs at least {}",
                policy.min_freeable_tokens
            ))
        } else {
            Err(format!(
                "waiting for new material: {freeable_now} tokens are freeable, {baseline} were left by the last attempt, and {} more are needed first",
                policy.min_freeable_tokens
            ))
        }
    }

    /// Remember an attempt's outcome: what it left freeable when it fell short of its target,
    /// nothing when it reached it. A trigger the guard skipped, or one that found nothing to
    /// do, is not an attempt and changes nothing.
    pub fn record(&mut self, report: &CompactionReport) {
        if !report.no_compaction_needed && !report.skipped {
            self.freeable_after_last = (!report.reached).then_some(report.freeable_tokens_after);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_new_freeable_tokens_after_an_attempt() {
        let policy = ContextPolicy::default();
        let mut guard = ThrashGuard::new();
        assert!(guard.allows(9_999, &policy).is_err());
        assert!(guard.allows(10_000, &policy).is_ok());
        guard.record(&CompactionReport {
            freeable_tokens_after: 4_000,
            ..Default::default()
        });
        let refusal = guard.allows(12_000, &policy).unwrap_err();
        assert!(refusal.contains("4000"), "{refusal}");
        assert!(guard.allows(14_000, &policy).is_ok());
    }

    #[test]
    fn an_attempt_that_reached_its_target_leaves_no_baseline() {
        let policy = ContextPolicy::default();
        let mut guard = ThrashGuard::new();
        guard.record(&CompactionReport {
            freeable_tokens_after: 4_000,
            ..Default::default()
        });
        guard.record(&CompactionReport {
            reached: true,
            freeable_tokens_after: 6_000,
            ..Default::default()
        });
        // Only the minimum applies again: what the target did not need is no baseline.
        assert_eq!(guard.freeable_after_last, None);
        assert!(guard.allows(10_000, &policy).is_ok());
        assert!(guard.allows(9_999, &policy).is_err());
    }
}
