//! `--mode replay`: the replay table — compactions, tokens, summarizer use, timings, invariants.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use troupe::compaction::transcript::ledger_from_transcript;
use troupe::compaction::{CompactOptions, ContextPolicy, compact};
use troupe::protocol::{
    ChatMessage, ChatModel, ChatRequest, ChatStream, Conversation, MessageId, ModelError,
    ModelInfo, stream_response,
};
use troupe::tokens::TokenCounter;
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::{
    Compressor, ReplayObserver, ReplayedCompaction, replay_transcript,
};

/// A chat model that adds the time spent in its calls to a clock the replay's observer reads
/// (and resets) at every compaction: the compression agent's model time, tool loop and summaries
/// together.
pub(super) struct TimedModel {
    pub(super) inner: Arc<dyn ChatModel>,
    pub(super) nanos: Arc<AtomicU64>,
}

#[async_trait]
impl ChatModel for TimedModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    /// The evaluation times whole calls: the answer is collected, timed, then handed on as a
    /// stream of its own.
    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let started = Instant::now();
        let out = self.inner.chat(request).await;
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
        Ok(stream_response(out?, 4096))
    }
}

/// One replay of one transcript at one window with one summarizer.
#[derive(Debug, Default)]
pub(super) struct Row {
    pub(super) transcript: String,
    pub(super) window: usize,
    pub(super) model: String,
    pub(super) messages: usize,
    pub(super) raw_tokens: usize,
    pub(super) peak_tokens: usize,
    pub(super) final_tokens: usize,
    pub(super) compactions: usize,
    pub(super) skipped: usize,
    pub(super) before: usize,
    pub(super) after: usize,
    pub(super) calls: usize,
    pub(super) input_tokens: usize,
    pub(super) output_tokens: usize,
    pub(super) tier3_removed: usize,
    pub(super) ms_excl_model: Vec<f64>,
    pub(super) model_ms: f64,
    /// Local-model summaries replaced by the mechanical one.
    pub(super) stand_ins: usize,
    pub(super) not_reached: usize,
    pub(super) invariant_failures: usize,
    pub(super) paths_named: usize,
    pub(super) paths_total: usize,
    pub(super) missing_paths: Vec<String>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Everything a path could be named in: text, tool-call names and arguments.
fn haystack(messages: &[ChatMessage]) -> String {
    let mut all = String::new();
    for m in messages {
        all.push_str(&m.text());
        all.push('\n');
        for call in m.calls() {
            all.push_str(&call.function.arguments);
            all.push('\n');
        }
    }
    all
}

/// Tokens of the messages tier 3 replaced: those present after a tiers-1–2-only pass over
/// `conversation` but gone from `result`, counted as they stand after tiers 1–2. The pass is a
/// measuring stick, not a replay: it calls `compact` with no summarizer on the conversation the
/// compression agent was given.
async fn tier3_removed(
    conversation: &Conversation,
    result: &[ChatMessage],
    policy: &ContextPolicy,
    counter: &dyn TokenCounter,
) -> anyhow::Result<usize> {
    if result.len() >= conversation.len() {
        return Ok(0);
    }
    let ledger = ledger_from_transcript(conversation.messages());
    let tiers_1_2 = compact(
        conversation,
        &ledger,
        policy,
        counter,
        None,
        CompactOptions::default(),
    )
    .await?;
    let kept: HashSet<MessageId> = result.iter().map(|m| m.id).collect();
    Ok(tiers_1_2
        .messages
        .iter()
        .filter(|m| !kept.contains(&m.id))
        .map(|m| counter.count_message(m))
        .sum())
}

/// Whether a report's fallback is a local-model summary the mechanical one stood in for: the
/// compression agent adds `ModelSummarizer`'s reasons, which read "summarizer model `M` gave no
/// usable summary (…)", to the compaction's `fallbacks`.
fn is_stand_in(fallback: &str) -> bool {
    fallback.starts_with("summarizer model ")
}

/// What the evaluation takes from `replay_transcript` as it runs, beyond its report.
struct Measure<'a> {
    row: Row,
    /// The compression agent's model time since the last compaction (zero without a model).
    model_nanos: &'a AtomicU64,
    /// For each compaction that summarized: the conversation it was given and what it returned,
    /// for the tier-3 measure once the replay is done.
    summarized: Vec<(Conversation, Vec<ChatMessage>)>,
    final_conversation: Conversation,
}

impl ReplayObserver for Measure<'_> {
    fn on_compaction(&mut self, event: &ReplayedCompaction<'_>) {
        let model_time = Duration::from_nanos(self.model_nanos.swap(0, Ordering::Relaxed));
        let report = &event.compaction.report;
        let row = &mut self.row;
        row.compactions += 1;
        row.invariant_failures += usize::from(!event.row.invariants_ok);
        row.before += report.tokens_before;
        row.after += report.tokens_after;
        row.calls += report.summarizer.calls;
        row.input_tokens += report.summarizer.input_tokens;
        row.output_tokens += report.summarizer.output_tokens;
        row.stand_ins += report.fallbacks.iter().filter(|f| is_stand_in(f)).count();
        row.not_reached += usize::from(!report.reached);
        if report.summarizer.calls > 0 {
            self.summarized
                .push((event.before.clone(), event.compaction.messages.clone()));
        }
        let model_ms = model_time.as_secs_f64() * 1000.0;
        row.ms_excl_model.push((event.row.ms - model_ms).max(0.0));
        row.model_ms += model_ms;
        eprintln!(
            "  {} @ {} ({}): compaction at message {}: {} → {} tokens, {} summarizer call(s), {:.1} s in the model",
            row.transcript,
            row.window,
            row.model,
            event.row.at_message,
            report.tokens_before,
            report.tokens_after,
            report.summarizer.calls,
            model_time.as_secs_f64()
        );
    }

    fn on_finish(&mut self, conversation: &Conversation) {
        self.final_conversation = conversation.clone();
    }
}

/// Replay `input` at `window` through a compression agent of its own (a fresh anti-thrash
/// memory) that summarizes with `model` (`None`: the mechanical summarizer), exactly as
/// `troupe replay` does, and measure it.
pub(super) async fn replay(
    name: &str,
    input: &TranscriptFile,
    window: usize,
    label: &str,
    model: Option<Arc<dyn ChatModel>>,
) -> anyhow::Result<Row> {
    let policy = ContextPolicy::for_window(window);
    policy.validate()?;
    let counter = troupe::agents::shared_counter();
    let model_nanos = Arc::new(AtomicU64::new(0));
    let model = model.map(|inner| {
        Arc::new(TimedModel {
            inner,
            nanos: model_nanos.clone(),
        }) as Arc<dyn ChatModel>
    });
    let mut measure = Measure {
        row: Row {
            transcript: name.to_string(),
            window,
            model: label.to_string(),
            messages: input.messages.len(),
            ..Row::default()
        },
        model_nanos: &model_nanos,
        summarized: Vec::new(),
        final_conversation: Conversation::new(),
    };
    let compressor = Compressor::start(model, counter.clone()).await?;
    let report =
        replay_transcript(input, &policy, counter.as_ref(), &compressor, &mut measure).await;
    compressor.shutdown().await;
    let report = report?;
    let Measure {
        mut row,
        summarized,
        final_conversation,
        ..
    } = measure;
    row.raw_tokens = report.raw_tokens;
    row.peak_tokens = report.peak_tokens;
    row.final_tokens = report.final_tokens;
    row.skipped = report.skipped;
    for (before, after) in &summarized {
        row.tier3_removed += tier3_removed(before, after, &policy, counter.as_ref()).await?;
    }

    let paths = ledger_from_transcript(&input.messages).all_files();
    let text = haystack(&final_conversation.to_messages());
    row.paths_total = paths.len();
    for path in paths {
        if text.contains(path.as_str()) {
            row.paths_named += 1;
        } else {
            row.missing_paths.push(path);
        }
    }
    Ok(row)
}

pub(super) fn table(rows: &[Row]) -> String {
    let mut md = String::new();
    md.push_str(
        "| transcript | window | model | msgs | compactions (skipped) | peak → final tokens (raw) | tokens before → after, all compactions | ratio | summarizer calls | summarizer in / out tokens | tier-3 removed | in ÷ removed | ms/compaction excl. model (median) | model s | invariant failures | paths named |\n",
    );
    md.push_str("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for r in rows {
        let ratio = if r.before > 0 {
            format!("{:.2}", r.after as f64 / r.before as f64)
        } else {
            "–".into()
        };
        let in_over_removed = if r.tier3_removed > 0 {
            format!("{:.2}", r.input_tokens as f64 / r.tier3_removed as f64)
        } else {
            "–".into()
        };
        let ms = if r.ms_excl_model.is_empty() {
            "–".into()
        } else {
            format!("{:.1}", median(r.ms_excl_model.clone()))
        };
        let model_s = if r.model == "none" || r.compactions == 0 {
            "–".into()
        } else {
            format!("{:.1}", r.model_ms / 1000.0)
        };
        let _ = writeln!(
            md,
            "| {} | {}k | {} | {} | {} ({}) | {} → {} ({}) | {} → {} | {} | {} | {} / {} | {} | {} | {} | {} | {}{} | {}/{} |",
            r.transcript,
            r.window / 1000,
            r.model,
            r.messages,
            r.compactions,
            r.skipped,
            r.peak_tokens,
            r.final_tokens,
            r.raw_tokens,
            r.before,
            r.after,
            ratio,
            r.calls,
            r.input_tokens,
            r.output_tokens,
            r.tier3_removed,
            in_over_removed,
            ms,
            model_s,
            r.invariant_failures,
            if r.not_reached > 0 {
                format!(" ({} not at target)", r.not_reached)
            } else {
                String::new()
            },
            r.paths_named,
            r.paths_total,
        );
    }
    md
}
