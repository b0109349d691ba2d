//! The context policy: how big the context is, when to warn, when to compact, how far to shrink.

use serde::{Deserialize, Serialize};

use crate::economics::{CostModel, Rates};

use crate::session::{SUMMARY_BUDGET_FLOOR, SUMMARY_FRAME_ESTIMATE};

/// The most of the target the artifact blocks of one summary may take, in percent.
pub(crate) const ARTIFACT_SHARE_PERCENT: usize = 50;

/// The share of the window a compaction keeps free below the automatic trigger when it raises
/// its aim above an unreachable target: the turn after it then has this much room to grow
/// before the trigger compacts again (5 %: 3.2k tokens of a 64k window, 6.4k of 128k).
pub(crate) const UNREACHABLE_TARGET_MARGIN: f64 = 0.05;

/// When compaction warns, triggers and where it aims, plus the knobs of its tiers.
///
/// Fractions are of the usable window ([`ContextPolicy::usable_tokens`]): the context window
/// less the room every request keeps for the model's answer ([`ContextPolicy::output_reserve`]),
/// which is what the conversation can actually use (as Claude Code computes its effective
/// window). The `[ctx: N%]` of `troupe chat`, `/context` and reports count on the same base.
/// Defaults: a warning at 70 % (room to act
/// before anything is compacted), the automatic trigger at 80 %, a target of 40 % (so one
/// compaction buys half a window of work) for manual and emergency compactions while automatic
/// ones take the cost-aware target ([`ContextPolicy::cost_aware`]), the last 5 user/assistant
/// messages protected.
/// Deserializing fills missing fields with defaults, so a serialized policy (a compaction
/// request from a peer of another version) may lack fields; call [`ContextPolicy::validate`]
/// afterwards. A config file's `[compaction]` table is not this form: it names the thresholds
/// of every agent's policy, each agent's window its model's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextPolicy {
    /// The model's context window in tokens.
    pub context_window: usize,
    /// Tokens of the window every request keeps free for the model's answer; the thresholds
    /// are fractions of what is left. An agent sets it from its settings
    /// (`CompactionSettings::output_reserve`, else its `max_tokens`); 0 for a bare policy.
    pub output_reserve: usize,
    /// Fraction at which a context warning is raised.
    pub warning: f64,
    /// Fraction at which automatic compaction starts.
    pub trigger: f64,
    /// Fraction compaction shrinks to.
    pub target: f64,
    /// How many of the most recent user/assistant messages are never touched.
    pub protected_recent: usize,
    /// Tier 1: tool outputs above this many tokens are truncated to about this size.
    pub tool_output_limit_tokens: usize,
    /// Anti-thrash: an automatic compaction needs at least this many freeable tokens.
    pub min_freeable_tokens: usize,
    /// Tier 3: the most tokens a segment summary may take.
    pub summary_max_tokens: usize,
    /// Per-message mode: the most tokens a summarized user message may take.
    pub per_message_user_tokens: usize,
    /// Per-message mode: the most tokens a summarized assistant message may take.
    pub per_message_assistant_tokens: usize,
    /// Automatic compactions (and the agent's own `compact` tool) shrink to the cost-aware
    /// target chosen from the conversation ([`crate::economics::cost_aware_target`]: the
    /// billed input per turn, minimised between 20 % and 60 % of the window) instead of
    /// `target`; manual and emergency compactions keep `target`. On by default: on the eval's
    /// dev transcripts it billed 13–21 % less than the fixed 40 % and no peer strategy was both
    /// cheaper and as good on recall (BENCHMARKS.md, "Compaction economics").
    pub cost_aware: bool,
    /// The prompt cache the agent's provider bills under, when known: receipts are priced
    /// under it (OpenAI's default rates when not known), and the minimum-gain rule declines a
    /// compaction that loses under it (under either provider's caching when not known).
    pub pricing: Option<CostModel>,
}

impl Default for ContextPolicy {
    fn default() -> Self {
        ContextPolicy {
            context_window: 128_000,
            output_reserve: 0,
            warning: 0.70,
            trigger: 0.80,
            target: 0.40,
            protected_recent: 5,
            tool_output_limit_tokens: 2_000,
            min_freeable_tokens: 10_000,
            summary_max_tokens: 2_000,
            per_message_user_tokens: 50,
            per_message_assistant_tokens: 200,
            cost_aware: true,
            pricing: None,
        }
    }
}

/// Where a token count stands against the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextLevel {
    /// Below the warning threshold.
    Ok,
    /// At or above the warning threshold, below the trigger.
    Warning,
    /// At or above the trigger: compact now.
    Trigger,
}

/// Why a policy is unusable; every message names the field at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// The window is zero.
    #[error("context_window must be above 0")]
    EmptyWindow,
    /// The output reserve leaves the conversation no room.
    #[error("output_reserve ({reserve}) must be below context_window ({window})")]
    ReserveFillsWindow {
        /// The reserve.
        reserve: usize,
        /// The window.
        window: usize,
    },
    /// A rate of `pricing` is negative or not a number.
    #[error("pricing rates must be non-negative numbers: {0:?}")]
    Unpriced(Rates),
    /// A fraction is not strictly between 0 and 1.
    #[error("{field} ({value}) must be a fraction strictly between 0 and 1")]
    NotAFraction {
        /// The field at fault.
        field: &'static str,
        /// The value the configuration gave it.
        value: f64,
    },
    /// Two fractions are in the wrong order.
    #[error("{field} ({value}) must be {relation} {other} ({other_value})")]
    Misordered {
        /// The field at fault.
        field: &'static str,
        /// The value the configuration gave it.
        value: f64,
        /// "below" or "at most".
        relation: &'static str,
        /// The field it is compared with.
        other: &'static str,
        /// That field's value.
        other_value: f64,
    },
    /// A size is too small to work with.
    #[error("{field} ({value}) must be at least {min}")]
    TooSmall {
        /// The field at fault.
        field: &'static str,
        /// The value the configuration gave it.
        value: usize,
        /// The smallest allowed value.
        min: usize,
    },
}

impl ContextPolicy {
    /// The default policy for a model with `context_window` tokens.
    ///
    /// The anti-thrash minimum is 10k tokens, scaled down to a tenth of small windows: between
    /// the trigger (80 %) and the target (40 %) lie only 0.4 × the window, so a fixed 10k would
    /// keep automatic compaction from ever running on an 8k or 16k model.
    pub fn for_window(context_window: usize) -> Self {
        let defaults = ContextPolicy::default();
        ContextPolicy {
            context_window,
            min_freeable_tokens: defaults.min_freeable_tokens.min(context_window / 10),
            ..defaults
        }
    }

    /// Check that the policy makes sense: `0 < target < trigger < 1`, `warning ≤ trigger`, sizes
    /// large enough to act on.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.context_window == 0 {
            return Err(PolicyError::EmptyWindow);
        }
        if self.output_reserve >= self.context_window {
            return Err(PolicyError::ReserveFillsWindow {
                reserve: self.output_reserve,
                window: self.context_window,
            });
        }
        for (field, value) in [
            ("warning", self.warning),
            ("trigger", self.trigger),
            ("target", self.target),
        ] {
            if !(value.is_finite() && value > 0.0 && value < 1.0) {
                return Err(PolicyError::NotAFraction { field, value });
            }
        }
        if self.target >= self.trigger {
            return Err(PolicyError::Misordered {
                field: "target",
                value: self.target,
                relation: "below",
                other: "trigger",
                other_value: self.trigger,
            });
        }
        if let Some(pricing) = self.pricing
            && !pricing.is_priced()
        {
            return Err(PolicyError::Unpriced(pricing.rates()));
        }
        if self.warning > self.trigger {
            return Err(PolicyError::Misordered {
                field: "warning",
                value: self.warning,
                relation: "at most",
                other: "trigger",
                other_value: self.trigger,
            });
        }
        for (field, value, min) in [
            (
                "tool_output_limit_tokens",
                self.tool_output_limit_tokens,
                16,
            ),
            ("summary_max_tokens", self.summary_max_tokens, 16),
            ("per_message_user_tokens", self.per_message_user_tokens, 1),
            (
                "per_message_assistant_tokens",
                self.per_message_assistant_tokens,
                1,
            ),
        ] {
            if value < min {
                return Err(PolicyError::TooSmall { field, value, min });
            }
        }
        Ok(())
    }

    /// The tokens a conversation (with its tool definitions) can use: the window less the
    /// output reserve. The base of every threshold and of [`ContextPolicy::percent`].
    pub fn usable_tokens(&self) -> usize {
        self.context_window.saturating_sub(self.output_reserve)
    }

    fn fraction_of_window(&self, fraction: f64) -> usize {
        (self.usable_tokens() as f64 * fraction).floor() as usize
    }

    /// The token count compaction aims for.
    pub fn target_tokens(&self) -> usize {
        self.fraction_of_window(self.target)
    }

    /// The token count at which automatic compaction starts.
    pub fn trigger_tokens(&self) -> usize {
        self.fraction_of_window(self.trigger)
    }

    /// The token count at which a warning is raised.
    pub fn warning_tokens(&self) -> usize {
        self.fraction_of_window(self.warning)
    }

    /// The room a summary and its artifact ledger take in a conversation whose target is within
    /// reach: the body's bound (`summary_max_tokens`, at most a third of the target) plus the
    /// ledger's share (half the target). It is the floor they keep when the target is not within
    /// reach (see [`ContextPolicy::aim_tokens`]).
    pub fn summary_room_tokens(&self) -> usize {
        let target = self.target_tokens();
        self.summary_max_tokens.min(target / 3) + target * ARTIFACT_SHARE_PERCENT / 100
    }

    /// The most a compaction that raised its aim leaves: the trigger less a margin of 5 % of
    /// the window (so the next turn does not compact again at once), never below the target.
    pub fn raised_aim_ceiling_tokens(&self) -> usize {
        let margin = self.fraction_of_window(UNREACHABLE_TARGET_MARGIN);
        self.trigger_tokens()
            .saturating_sub(margin)
            .max(self.target_tokens())
    }

    /// The least room under the target that still holds a summary worth writing: the smallest
    /// body (six headings, one short goal item) with its wrapping, or 5 % of the target on
    /// large windows. A target that leaves less is out of reach.
    pub fn min_summary_room_tokens(&self) -> usize {
        (SUMMARY_BUDGET_FLOOR + SUMMARY_FRAME_ESTIMATE).max(self.target_tokens() / 20)
    }

    /// What a compaction aims for when `fixed_tokens` of the conversation can be neither
    /// summarized nor removed (the protected messages, and the results of their calls at the
    /// size of their mask stubs).
    ///
    /// The target, while it leaves a summary room to be written in
    /// ([`ContextPolicy::min_summary_room_tokens`]): a target within reach is met. Beyond that
    /// the target is a preference out of reach and the window is the limit: squeezing the
    /// summary to nothing would save tokens the window still has and lose the names an engineer
    /// resumes with. The aim is then `fixed_tokens` plus the room a summary and its ledger take
    /// when the target is within reach ([`ContextPolicy::summary_room_tokens`]), at most
    /// [`ContextPolicy::raised_aim_ceiling_tokens`].
    pub fn aim_tokens(&self, fixed_tokens: usize) -> usize {
        let target = self.target_tokens();
        if fixed_tokens.saturating_add(self.min_summary_room_tokens()) <= target {
            return target;
        }
        fixed_tokens
            .saturating_add(self.summary_room_tokens())
            .min(self.raised_aim_ceiling_tokens())
            .max(target)
    }

    /// Where `tokens` stands against this policy.
    pub fn state(&self, tokens: usize) -> ContextLevel {
        if tokens >= self.trigger_tokens() {
            ContextLevel::Trigger
        } else if tokens >= self.warning_tokens() {
            ContextLevel::Warning
        } else {
            ContextLevel::Ok
        }
    }

    /// `tokens` as a whole percentage of the usable window (for `[ctx: 45%]`).
    pub fn percent(&self, tokens: usize) -> usize {
        (tokens as f64 * 100.0 / self.usable_tokens().max(1) as f64).round() as usize
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Warning, trigger, target and the percent shown are of the window less the output
    /// reserve: what the conversation can use (#42).
    #[test]
    fn thresholds_and_percent_are_of_the_usable_window() {
        let policy = ContextPolicy {
            output_reserve: 4_000,
            ..ContextPolicy::for_window(32_000)
        };
        policy.validate().unwrap();
        assert_eq!(policy.usable_tokens(), 28_000);
        assert_eq!(policy.warning_tokens(), 19_600);
        assert_eq!(policy.trigger_tokens(), 22_400);
        assert_eq!(policy.target_tokens(), 11_200);
        assert_eq!(policy.percent(14_000), 50);
        assert_eq!(policy.state(22_399), ContextLevel::Warning);
        assert_eq!(policy.state(22_400), ContextLevel::Trigger);
        let full = ContextPolicy {
            output_reserve: 32_000,
            ..ContextPolicy::for_window(32_000)
        };
        assert_eq!(
            full.validate(),
            Err(PolicyError::ReserveFillsWindow {
                reserve: 32_000,
                window: 32_000
            })
        );
    }

    #[test]
    fn defaults_are_valid_and_states_follow_thresholds() {
        let policy = ContextPolicy::for_window(1_000);
        policy.validate().unwrap();
        assert_eq!(policy.target_tokens(), 400);
        assert_eq!(policy.state(699), ContextLevel::Ok);
        assert_eq!(policy.state(700), ContextLevel::Warning);
        assert_eq!(policy.state(800), ContextLevel::Trigger);
        assert_eq!(policy.percent(455), 46);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = ContextPolicy {
            target: 0.9,
            ..ContextPolicy::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "target (0.9) must be below trigger (0.8)"
        );
        let bad = ContextPolicy {
            trigger: 1.2,
            ..ContextPolicy::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "trigger (1.2) must be a fraction strictly between 0 and 1"
        );
        let bad = ContextPolicy {
            warning: 0.85,
            ..ContextPolicy::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "warning (0.85) must be at most trigger (0.8)"
        );
        let bad = ContextPolicy {
            target: f64::NAN,
            ..ContextPolicy::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .starts_with("target (NaN)")
        );
        let bad = ContextPolicy {
            context_window: 0,
            ..ContextPolicy::default()
        };
        assert_eq!(bad.validate().unwrap_err(), PolicyError::EmptyWindow);
        let bad = ContextPolicy {
            pricing: Some(CostModel::anthropic().with_rates(Rates {
                cached_read: -0.1,
                ..Rates::ANTHROPIC
            })),
            ..ContextPolicy::default()
        };
        assert!(matches!(bad.validate(), Err(PolicyError::Unpriced(_))));
        let bad = ContextPolicy {
            pricing: Some(CostModel::openai().with_rates(Rates {
                input: f64::NAN,
                ..Rates::OPENAI
            })),
            ..ContextPolicy::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .starts_with("pricing rates must be non-negative numbers")
        );
        let bad = ContextPolicy {
            tool_output_limit_tokens: 3,
            ..ContextPolicy::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "tool_output_limit_tokens (3) must be at least 16"
        );
    }

    #[test]
    fn the_anti_thrash_minimum_scales_with_small_windows() {
        assert_eq!(
            ContextPolicy::for_window(128_000).min_freeable_tokens,
            10_000
        );
        assert_eq!(ContextPolicy::for_window(32_000).min_freeable_tokens, 3_200);
        assert_eq!(ContextPolicy::for_window(8_000).min_freeable_tokens, 800);
        // Always below what one compaction can free (trigger - target = 0.4 of the window).
        for window in [4_000, 8_000, 16_000, 32_000, 128_000, 1_000_000] {
            let p = ContextPolicy::for_window(window);
            assert!((p.min_freeable_tokens as f64) < (p.trigger - p.target) * window as f64);
        }
    }

    #[test]
    fn the_aim_rises_above_an_unreachable_target_up_to_the_trigger_less_the_margin() {
        let policy = ContextPolicy::for_window(64_000);
        assert_eq!(policy.target_tokens(), 25_600);
        // Body bound 2k plus half the target for the ledger.
        assert_eq!(policy.summary_room_tokens(), 2_000 + 12_800);
        // 80 % less 5 % of the window.
        assert_eq!(policy.raised_aim_ceiling_tokens(), 48_000);
        // Within reach: the target, even where it leaves the summary less than its room.
        assert_eq!(policy.min_summary_room_tokens(), 1_280);
        assert_eq!(policy.aim_tokens(5_000), 25_600);
        assert_eq!(policy.aim_tokens(25_600 - 1_280), 25_600);
        // Out of reach: the summary keeps its room.
        assert_eq!(policy.aim_tokens(25_600 - 1_279), 25_600 - 1_279 + 14_800);
        // The issue's case: a 27.8k protected paste keeps the summary's room.
        assert_eq!(policy.aim_tokens(27_800), 27_800 + 14_800);
        // Small windows: the smallest summary's room decides.
        assert_eq!(
            ContextPolicy::for_window(8_000).min_summary_room_tokens(),
            224
        );
        // Never above the ceiling, whatever is fixed.
        assert_eq!(policy.aim_tokens(40_000), 48_000);
        assert_eq!(policy.aim_tokens(usize::MAX), 48_000);
        // A trigger close to the target: the ceiling never falls below the target.
        let close = ContextPolicy {
            target: 0.78,
            ..ContextPolicy::for_window(64_000)
        };
        assert_eq!(close.raised_aim_ceiling_tokens(), close.target_tokens());
        assert_eq!(close.aim_tokens(60_000), close.target_tokens());
    }

    #[test]
    fn partial_config_fills_defaults() {
        let policy: ContextPolicy =
            serde_json::from_str(r#"{"context_window": 32000, "target": 0.5}"#).unwrap();
        assert_eq!(policy.context_window, 32_000);
        assert_eq!(policy.target, 0.5);
        assert_eq!(policy.protected_recent, 5);
    }
}
