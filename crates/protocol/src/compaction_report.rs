//! What started a compaction and what it did: the trigger and the report the compaction crate
//! works with and the event bus, the session log, traces, the CLI and tests carry.
//!
//! The types live here, below the compaction crate, so that [`crate::Event::CompactionStarted`],
//! [`crate::Event::CompactionFinished`] and the session log can hold them typed;
//! `troupe_compaction` re-exports them at its root.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What asked for a compaction — the one trigger type of troupe; automatic and agent-tool
/// requests are rate-limited by the anti-thrash guard (`troupe_compaction::ThrashGuard`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactTrigger {
    /// A person (`/compact`, `troupe compact`): always attempted.
    #[default]
    Manual,
    /// The budget trigger: skipped unless enough tokens are freeable.
    Automatic,
    /// The agent's own `compact` tool: rate-limited like an automatic trigger.
    AgentTool,
    /// A provider refused the request as too long ("context length exceeded"): always
    /// attempted, then the request is retried once.
    Emergency,
}

impl CompactTrigger {
    /// The trigger's name as events, spans and reports write it (its serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            CompactTrigger::Manual => "manual",
            CompactTrigger::Automatic => "automatic",
            CompactTrigger::AgentTool => "agent_tool",
            CompactTrigger::Emergency => "emergency",
        }
    }

    /// Whether the anti-thrash guard may hold this trigger back (the budget trigger and the
    /// agent's own tool; never a person or an emergency).
    pub fn is_rate_limited(self) -> bool {
        matches!(self, CompactTrigger::Automatic | CompactTrigger::AgentTool)
    }
}

impl fmt::Display for CompactTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many messages each tier touched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierCounts {
    /// Tier 1: tool outputs truncated.
    pub truncated: usize,
    /// Tier 2: tool results masked by stubs.
    pub masked: usize,
    /// Tier 2: display-only messages removed.
    pub display_only_removed: usize,
    /// Tier 3, per-message mode: messages shortened individually.
    pub per_message_summarized: usize,
    /// Tier 3: summaries created.
    pub segment_summaries: usize,
    /// Tier 3: messages replaced by those summaries.
    pub summarized_messages: usize,
}

/// What the summarizer was asked to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummarizerUsage {
    /// Requests sent (folded segments take several).
    pub calls: usize,
    /// Input tokens of all requests.
    pub input_tokens: usize,
    /// Output tokens of all answers.
    pub output_tokens: usize,
    /// Of `calls`, those that continued the agent's own conversation (the agent's model
    /// summarizing inline): their prompt is the agent's last request plus an instruction, so
    /// a provider reads it from its cache. Absent in reports written before they existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inline_calls: usize,
    /// Of `input_tokens`, those of the inline calls.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inline_input_tokens: usize,
}

/// Why and how far a compaction aimed above its target: the messages it may not summarize
/// left the summary and its artifact ledger less than their room under the target, so it kept
/// that room instead of squeezing them, within a ceiling below the automatic trigger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaisedAim {
    /// Tokens no compaction can take out: the protected messages, and the results of their
    /// tool calls at the size of their mask stubs.
    pub fixed_tokens: usize,
    /// The room the summary and its ledger keep: what they take when the target is within
    /// reach (the summary bound, at most a third of the target, plus half the target).
    pub room_tokens: usize,
    /// The most the result may take: the automatic trigger less a margin (5 % of the window),
    /// so the next turn does not compact again at once.
    pub ceiling_tokens: usize,
    /// What the compaction aimed for instead of the target: fixed plus room, at most the
    /// ceiling.
    pub aim_tokens: usize,
}

/// A compaction's price against the provider's prompt cache: what it keeps cached, what it
/// makes the next call re-read and what it saves over the calls until the next compaction,
/// in units of one uncached input token under the cost model it was computed for.
///
/// Computed by `troupe_compaction::economics::receipt` (which names it `Receipt`); it lives
/// here, as plain data, so a [`CompactionReport`] can carry it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionReceipt {
    /// Request tokens before the compaction.
    pub tokens_before: usize,
    /// Request tokens after.
    pub tokens_after: usize,
    /// Tokens of the longest prefix of messages the compaction left byte-identical: still a
    /// cached prefix for the next call.
    pub cached_prefix_kept: usize,
    /// The tokens of the messages after that prefix (`tokens_after − cached_prefix_kept`
    /// less the request's reply priming): what the next call reads fresh.
    pub rebilled_tokens: usize,
    /// What the compaction's summarizer calls cost.
    pub summarizer_billed: f64,
    /// The calls expected before the next compaction.
    pub expected_turns: f64,
    /// `(tokens_before − tokens_after) × cached rate × expected_turns − rebilled_tokens ×
    /// (fresh rate − cached rate) − summarizer_billed`; negative when the compaction costs
    /// more than it saves.
    pub net_saving: f64,
    /// The cost model it was priced under (`openai` or `anthropic`: the agent's provider's
    /// caching when its policy names it, else `openai`).
    #[serde(default)]
    pub pricing: String,
}

/// The outcome of one compaction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionReport {
    /// Request tokens before.
    pub tokens_before: usize,
    /// Request tokens after.
    pub tokens_after: usize,
    /// The target in tokens.
    pub target_tokens: usize,
    /// The context window the policy describes.
    pub context_window: usize,
    /// `tokens_after / tokens_before` (1.0 when nothing changed).
    pub ratio: f64,
    /// Messages per tier.
    pub tiers: TierCounts,
    /// Protected messages (never touched).
    pub protected: usize,
    /// Summarizer calls and tokens.
    pub summarizer: SummarizerUsage,
    /// Wall time of the compaction in milliseconds.
    pub duration_ms: f64,
    /// Whether the result is at or below target.
    pub reached: bool,
    /// Why it ended the way it did ("target reached", "no compaction needed", "target
    /// unreachable: …").
    pub reason: String,
    /// The conversation was already under target and was returned unchanged.
    pub no_compaction_needed: bool,
    /// An automatic trigger the anti-thrash guard held back: nothing was tried (`reason` says why).
    #[serde(default)]
    pub skipped: bool,
    /// Things that went wrong on the way and what was kept instead (e.g. a summarizer error).
    pub fallbacks: Vec<String>,
    /// Archived originals.
    pub archived: usize,
    /// Tokens compaction could still free in the result (the anti-thrash guard's measure).
    pub freeable_tokens_after: usize,
    /// Set when the target was out of reach for a summary with its room: what the compaction
    /// aimed for instead (`reason` says it in words). Absent in reports written before it
    /// existed, and whenever the target was aimed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised_aim: Option<RaisedAim>,
    /// What the compaction cost and saves against the provider's prompt cache, when whoever
    /// ran it priced it (the compression agent does for every compaction that changed the
    /// conversation). Absent in reports written before receipts existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<CompactionReceipt>,
    /// What the agent's compaction hooks asked for and how it went: a veto honoured or
    /// ignored, a pin of an unknown message, a preserve hint missing from the result. Absent
    /// when no hook said anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook_notes: Vec<HookNote>,
    /// Artifacts (by the compaction crate's artifact ledger) that a replacement hid and could
    /// not name for want of room: a stub's or a summary's list was full. Every other artifact
    /// of what the compaction took out is still named in its result. Absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_for_room: Vec<DroppedArtifact>,
}

/// An artifact a compaction took out of the context without naming it, for want of room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedArtifact {
    /// The name as the artifact ledger writes it (a command line, an error line, a test, a
    /// path, a name).
    pub name: String,
    /// About the tokens its line in the list would have taken.
    pub tokens: usize,
}

/// What became of one request of an agent's before-compaction hook (see
/// `troupe_agents::compression::hooks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "note", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HookNote {
    /// The hook vetoed the compaction and it was not run (the report is `skipped`).
    Vetoed {
        /// The hook's reason.
        reason: String,
    },
    /// The hook vetoed a compaction that must run — an emergency (the provider refused the
    /// request as too long) or a person's `/compact` — so the veto was ignored.
    VetoIgnored {
        /// What asked for the compaction.
        trigger: CompactTrigger,
        /// The hook's reason.
        reason: String,
    },
    /// The hook pinned a message the conversation does not hold; nothing was pinned for it.
    UnknownPin {
        /// The id the hook named.
        id: crate::MessageId,
    },
    /// A preserve hint the compacted conversation does not contain.
    HintMissing {
        /// The hint's text.
        hint: String,
    },
}

impl fmt::Display for HookNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HookNote::Vetoed { reason } => {
                write!(f, "vetoed by the before-compaction hook: {reason}")
            }
            HookNote::VetoIgnored { trigger, reason } => write!(
                f,
                "the before-compaction hook's veto ({reason}) was ignored: a {trigger} compaction always runs"
            ),
            HookNote::UnknownPin { id } => write!(
                f,
                "the before-compaction hook pinned {id}, which the conversation does not hold"
            ),
            HookNote::HintMissing { hint } => {
                write!(f, "the preserve hint {hint:?} is missing from the result")
            }
        }
    }
}

/// Fields that were added later are left out while zero, so a report of a run without them is
/// written as before (session logs written back byte for byte).
fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn reports_written_before_raised_aim_still_load_and_none_is_not_written() {
        let old = CompactionReport {
            reason: "target reached".into(),
            ..CompactionReport::default()
        };
        let json = serde_json::to_string(&old).unwrap();
        assert!(!json.contains("raised_aim"), "{json}");
        assert!(!json.contains("receipt"), "{json}");
        let back: CompactionReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, old);
        let raised = CompactionReport {
            raised_aim: Some(RaisedAim {
                fixed_tokens: 27_800,
                room_tokens: 14_800,
                ceiling_tokens: 48_000,
                aim_tokens: 42_600,
            }),
            ..old
        };
        let json = serde_json::to_string(&raised).unwrap();
        assert_eq!(
            serde_json::from_str::<CompactionReport>(&json).unwrap(),
            raised
        );
    }
}
