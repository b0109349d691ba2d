//! What a compaction did: the report the compaction crate produces and the event bus, the
//! session log, traces, the CLI and tests carry.
//!
//! The types live here, below the compaction crate, so that [`crate::Event::CompactionFinished`]
//! and the session log can hold them typed; `troupe_compaction` re-exports them at its root.

use serde::{Deserialize, Serialize};

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
}
