//! Replaying a transcript as if an agent lived it, compacting where the agent would.
//!
//! Before every model call (the next message is the assistant's) the replay measures what the
//! live agent measures: the conversation against the usable window, the window less the room
//! kept for the answer (the output reserve, [`CompactionSettings::output_reserve_for`] with no
//! model known: 4096 tokens, at most a quarter of the window). At the trigger it compacts
//! automatically; when the request would still not fit the window with its reserve, it
//! compacts as an emergency, as the agent does before refusing a request.
//! The report's `max_prompt_tokens` is the largest request a model call would have been sent.
//!
//! [`replay_transcript`] is the one replay loop: `troupe replay` shows its progress through a
//! [`ReplayObserver`], and the evaluation example (`examples/eval/`) takes from the same
//! observer what the [`ReplayReport`] does not carry — the conversation each compaction started
//! from, the whole [`Compaction`] (summarizer usage, fallbacks, the new messages) and the final
//! conversation.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use troupe_agents::CompactionSettings;
use troupe_agents::compression::CompactionRequest;
use troupe_compaction::invariants::validate;
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{Compaction, ContextPolicy};
use troupe_protocol::{CompactTrigger, CompactionReport};
use troupe_protocol::{CompactionReceipt, TierCounts};
use troupe_protocol::{Conversation, Role};
use troupe_tokens::TokenCounter;

use super::TranscriptOpError;
use super::compact::TRANSCRIPT_AGENT;
use super::compressor::Compressor;
use super::replay_cost::ReplayCost;
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
    /// What ran it: `automatic` at the trigger, `emergency` when the request would not fit the
    /// window even after that.
    #[serde(default)]
    pub trigger: CompactTrigger,
    /// The report's reason.
    pub reason: String,
    /// The compaction's receipt: under OpenAI's default rates as the compaction client priced
    /// it, or under the cost model of `troupe replay --cost` (then its summarizer priced by
    /// what the emulation billed). Absent in reports written before receipts existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<CompactionReceipt>,
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
    /// Tokens kept free for the model's answer at every call: a request compacts when its
    /// prompt plus this reaches the trigger.
    #[serde(default)]
    pub output_reserve: usize,
    /// The largest context any model call of the replay would have been sent (the conversation
    /// before each assistant message, after any compaction there): at most the window minus
    /// the output reserve, unless one message alone is larger.
    #[serde(default)]
    pub max_prompt_tokens: usize,
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
    /// What the session's input would have been billed by a provider that caches prompt
    /// prefixes (`troupe replay --cost`, [`CostMeter`](super::CostMeter)); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<ReplayCost>,
}

/// A compaction that changed the live conversation, as [`ReplayObserver::on_compaction`] sees
/// it: before it is applied.
#[derive(Debug, Clone, Copy)]
pub struct ReplayedCompaction<'a> {
    /// The row the report gets for it.
    pub row: &'a ReplayRow,
    /// The live conversation it compacted, as it stood (message ids included).
    pub before: &'a Conversation,
    /// What the compression agent returned: the new messages, the archive, the full report.
    pub compaction: &'a Compaction,
}

/// An automatic trigger that changed nothing: usually the compression agent's anti-thrash guard
/// held it back (`report.skipped`), else there was nothing it could compact.
#[derive(Debug, Clone, Copy)]
pub struct SkippedTrigger<'a> {
    /// How many transcript messages had been fed.
    pub at_message: usize,
    /// The compression agent's report; `reason` says why nothing changed.
    pub report: &'a CompactionReport,
}

/// Watches a [`replay_transcript`] as it runs. Every method does nothing by default; `()` is the
/// observer that watches nothing.
///
/// The calls come in replay order: `on_message` for every message fed, right after it
/// `on_compaction` or `on_skip` when the trigger fired there (then possibly an emergency
/// `on_compaction` when the request would still not fit the window), and `on_finish` once at
/// the end (not when the replay fails).
pub trait ReplayObserver {
    /// `fed` transcript messages have been fed (1 for the first).
    fn on_message(&mut self, fed: usize) {
        let _ = fed;
    }

    /// A compaction changed the live conversation; it is applied after this returns.
    fn on_compaction(&mut self, event: &ReplayedCompaction<'_>) {
        let _ = event;
    }

    /// An automatic trigger changed nothing (the report counts it in `skipped`).
    fn on_skip(&mut self, event: &SkippedTrigger<'_>) {
        let _ = event;
    }

    /// Every message was fed; `conversation` is the live conversation at the end.
    fn on_finish(&mut self, conversation: &Conversation) {
        let _ = conversation;
    }
}

/// Watches nothing.
impl ReplayObserver for () {}

/// Feed `input` message by message; before every point where the model would be called (the
/// next message is the assistant's), do what the live agent does before a model call: compact
/// automatically when the live conversation is at or over the trigger (of the usable window) —
/// an automatic [`CompactionRequest`] to `compressor`'s
/// compression agent, which applies the anti-thrash guard as it does for a live agent — and as
/// an emergency (never held back) when it would still not fit the window. `observer` is told of
/// every message fed, every compaction and skipped trigger, and the final conversation.
/// `counter` counts the live conversation; it should be the compressor's.
///
/// # Errors
/// [`TranscriptOpError::Compaction`] when a compaction fails outright.
pub async fn replay_transcript(
    input: &TranscriptFile,
    policy: &ContextPolicy,
    counter: &dyn TokenCounter,
    compressor: &Compressor,
    observer: &mut dyn ReplayObserver,
) -> Result<ReplayReport, TranscriptOpError> {
    // The compressor's cache: the compaction jobs then recount nothing the replay counted.
    let cache = compressor.token_cache();
    let mut conversation = Conversation::new();
    let (job_policy, reserve) = job_policy(policy);
    let mut report = ReplayReport {
        window: policy.context_window,
        trigger_tokens: job_policy.trigger_tokens(),
        output_reserve: reserve,
        invariants_ok: true,
        ..ReplayReport::default()
    };
    let messages = &input.messages;
    for (i, message) in messages.iter().enumerate() {
        conversation.push(message.clone());
        report.messages = i + 1;
        observer.on_message(i + 1);
        let mut tokens = cache.count_shared(counter, conversation.messages()).total;
        report.peak_tokens = report.peak_tokens.max(tokens);
        let model_turn_next = messages
            .get(i + 1)
            .is_some_and(|next| next.role == Role::Assistant);
        if !model_turn_next {
            continue;
        }
        for trigger in [CompactTrigger::Automatic, CompactTrigger::Emergency] {
            let due = match trigger {
                CompactTrigger::Automatic => tokens >= job_policy.trigger_tokens(),
                _ => tokens + reserve > policy.context_window,
            };
            if !due {
                continue;
            }
            let at = Point {
                at_message: i + 1,
                trigger,
            };
            if compact_at(
                at,
                &mut conversation,
                &job_policy,
                counter,
                compressor,
                observer,
                &mut report,
            )
            .await?
            {
                tokens = cache.count_shared(counter, conversation.messages()).total;
            }
        }
        report.max_prompt_tokens = report.max_prompt_tokens.max(tokens);
    }
    report.final_tokens = cache.count_shared(counter, conversation.messages()).total;
    report.raw_tokens = counter.count_messages(messages);
    observer.on_finish(&conversation);
    Ok(report)
}

/// The policy a replay's compactions work against, and the output reserve it keeps: a
/// transcript names no model, so the reserve is the one an agent without `max_tokens` keeps
/// (`policy`'s own when it names one), and the thresholds are of the window less it.
pub(crate) fn job_policy(policy: &ContextPolicy) -> (ContextPolicy, usize) {
    let settings = CompactionSettings {
        policy: Some(policy.clone()),
        output_reserve: (policy.output_reserve > 0).then_some(policy.output_reserve),
        ..CompactionSettings::default()
    };
    let job = settings.policy_for(policy.context_window, None);
    let reserve = job.output_reserve;
    (job, reserve)
}

/// Where a replay compacts: after which message, and why.
#[derive(Debug, Clone, Copy)]
struct Point {
    at_message: usize,
    trigger: CompactTrigger,
}

/// One compaction of the live conversation at `at`, told to `observer` and added to `report`;
/// returns whether it changed the conversation.
async fn compact_at(
    at: Point,
    conversation: &mut Conversation,
    policy: &ContextPolicy,
    counter: &dyn TokenCounter,
    compressor: &Compressor,
    observer: &mut dyn ReplayObserver,
    report: &mut ReplayReport,
) -> Result<bool, TranscriptOpError> {
    let ledger = ledger_from_transcript(conversation.messages());
    let started = Instant::now();
    let result = compressor
        .compact(CompactionRequest::new(
            TRANSCRIPT_AGENT,
            conversation.clone(),
            ledger,
            policy.clone(),
            at.trigger,
        ))
        .await?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if !result.changed() && at.trigger != CompactTrigger::Automatic {
        // An emergency is never held back: it found nothing it could compact.
        return Ok(false);
    }
    if !result.changed() {
        report.skipped += 1;
        report.last_skip_reason = Some(result.report.reason.clone());
        observer.on_skip(&SkippedTrigger {
            at_message: at.at_message,
            report: &result.report,
        });
        return Ok(false);
    }
    let invariants_ok = validate(
        &conversation.to_messages(),
        &result.messages,
        &result.archive,
        policy,
        counter,
    )
    .is_ok();
    report.invariants_ok &= invariants_ok;
    report.summarizer_calls += result.report.summarizer.calls;
    report.ms += ms;
    let row = ReplayRow {
        at_message: at.at_message,
        tokens_before: result.report.tokens_before,
        tokens_after: result.report.tokens_after,
        tiers: result.report.tiers,
        summarizer_calls: result.report.summarizer.calls,
        ms,
        invariants_ok,
        reached: result.report.reached,
        reason: result.report.reason.clone(),
        trigger: at.trigger,
        receipt: result.report.receipt.clone(),
    };
    observer.on_compaction(&ReplayedCompaction {
        row: &row,
        before: conversation,
        compaction: &result,
    });
    report.compactions.push(row);
    result.apply_to(conversation);
    Ok(true)
}
