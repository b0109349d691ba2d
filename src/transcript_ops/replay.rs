//! Replaying a transcript as if an agent lived it, compacting automatically at the trigger.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use troupe_compaction::{
    BudgetPolicy, CompactTrigger, TierCounts, TokenCache, TokenCounter, ledger_from_transcript,
    validate,
};
use troupe_runtime::{Conversation, Role};

use super::TranscriptOpError;
use super::compact::TRANSCRIPT_AGENT;
use super::compressor::{Compressor, CompressorJob};
use crate::transcript_file::TranscriptFile;

/// One automatic compaction during a replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayRow {
    /// How many transcript messages had been fed when it ran.
    pub at_message: usize,
    /// Tokens before.
    pub tokens_before: usize,
    /// Tokens after.
    pub tokens_after: usize,
    /// What each tier did.
    pub tiers: TierCounts,
    /// Summarizer calls.
    pub summarizer_calls: usize,
    /// Wall time in milliseconds.
    pub ms: f64,
    /// Whether an independent check of the invariants passed.
    pub invariants_ok: bool,
    /// Whether the target was reached.
    pub reached: bool,
    /// The report's reason.
    pub reason: String,
}

/// The whole replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// Messages fed.
    pub messages: usize,
    /// Tokens the transcript would take uncompacted.
    pub raw_tokens: usize,
    /// Tokens of the live conversation at the end.
    pub final_tokens: usize,
    /// The highest live token count seen.
    pub peak_tokens: usize,
    /// The window.
    pub window: usize,
    /// The trigger in tokens.
    pub trigger_tokens: usize,
    /// One row per compaction that changed something.
    pub compactions: Vec<ReplayRow>,
    /// Automatic triggers the thrash guard skipped.
    pub skipped: usize,
    /// Why the last skipped trigger was skipped.
    pub last_skip_reason: Option<String>,
    /// Total summarizer calls.
    pub summarizer_calls: usize,
    /// Total milliseconds in compaction.
    pub ms: f64,
    /// Whether every compaction passed the invariant check.
    pub invariants_ok: bool,
}

/// Feed `input` message by message; before every point where the model would be called (the
/// next message is the assistant's), compact automatically when the live conversation is at or
/// over the trigger — an automatic [`CompactionJob`](troupe_agents::compression::CompactionJob)
/// to `compressor`'s compression agent, which applies the anti-thrash guard as it does for a
/// live agent. `progress` is told how many messages were fed. `counter` counts the live
/// conversation; it should be the compressor's.
///
/// # Errors
/// [`TranscriptOpError::Compaction`] when a compaction fails outright.
pub async fn replay_transcript(
    input: &TranscriptFile,
    policy: &BudgetPolicy,
    counter: &dyn TokenCounter,
    compressor: &Compressor,
    mut progress: impl FnMut(usize),
) -> Result<ReplayReport, TranscriptOpError> {
    let cache = TokenCache::new();
    let mut conversation = Conversation::new();
    let mut report = ReplayReport {
        window: policy.context_window,
        trigger_tokens: policy.trigger_tokens(),
        invariants_ok: true,
        ..ReplayReport::default()
    };
    let messages = &input.messages;
    for (i, message) in messages.iter().enumerate() {
        conversation.push(message.clone());
        report.messages = i + 1;
        progress(i + 1);
        let tokens = cache.count_messages(counter, conversation.messages()).total;
        report.peak_tokens = report.peak_tokens.max(tokens);
        let model_turn_next = messages
            .get(i + 1)
            .is_some_and(|next| next.role == Role::Assistant);
        if !model_turn_next || tokens < policy.trigger_tokens() {
            continue;
        }
        let ledger = ledger_from_transcript(conversation.messages());
        let started = Instant::now();
        let result = compressor
            .compact(CompressorJob {
                agent: TRANSCRIPT_AGENT,
                conversation: &conversation,
                ledger: &ledger,
                policy,
                trigger: CompactTrigger::Automatic,
                instructions: None,
            })
            .await?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        if !result.changed() {
            report.skipped += 1;
            report.last_skip_reason = Some(result.report.reason.clone());
            continue;
        }
        let invariants_ok = validate(
            conversation.messages(),
            &result.messages,
            &result.archive,
            policy,
            counter,
        )
        .is_ok();
        report.invariants_ok &= invariants_ok;
        report.summarizer_calls += result.report.summarizer.calls;
        report.ms += ms;
        report.compactions.push(ReplayRow {
            at_message: i + 1,
            tokens_before: result.report.tokens_before,
            tokens_after: result.report.tokens_after,
            tiers: result.report.tiers,
            summarizer_calls: result.report.summarizer.calls,
            ms,
            invariants_ok,
            reached: result.report.reached,
            reason: result.report.reason.clone(),
        });
        result.apply_to(&mut conversation);
    }
    report.final_tokens = cache.count_messages(counter, conversation.messages()).total;
    report.raw_tokens = counter.count_messages(messages);
    Ok(report)
}
