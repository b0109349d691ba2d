//! Compaction evaluation on real transcripts: replays every transcript of a corpus as if an agent
//! lived it, compacting automatically at the trigger, at several context windows, with the
//! mechanical summarizer (`none`) and with the local model, and writes a markdown table.
//!
//! Run it:
//!
//! ```text
//! cargo run --release --example eval                                  # ../shared/corpus, 32k and 128k, both summarizers
//! cargo run --release --example eval -- --model none --out eval.md    # no model: fast, deterministic
//! cargo run --release --example eval -- --model local --local-max-tokens 30000
//! cargo run --release --example eval -- --corpus DIR --windows 16000,32000 --only swe-
//! ```
//!
//! The replay is `troupe::transcript_ops::replay_transcript` itself (what `troupe replay` runs),
//! each with a compression agent of its own: feed the transcript message by message; before
//! every assistant message, when the live conversation is at or over the trigger, send an
//! automatic compaction job to the compression agent (which applies the thrash guard) and apply
//! its result. What the replay's report does not carry — the summarizer's token usage per
//! compaction, the conversation each compaction was given (for the tier-3 measure), model time,
//! the final conversation (to check that every file path is still named) — the example takes
//! from the replay's `ReplayObserver`.
//!
//! Columns: compactions run (and automatic triggers the thrash guard skipped); tokens of the
//! live conversation at its peak and at the end, and of the uncompacted transcript; summarizer
//! calls and input/output tokens; "tier-3 removed": the tokens of the messages that summaries
//! replaced, counted as they stood after tiers 1–2 (a tiers-1–2-only pass over the same input),
//! and the summarizer input over it (goal ≤ 1.2); median milliseconds per compaction excluding
//! model time (the job's round trip to the compression agent, less the time inside its model —
//! tool loop and summaries alike — measured by wrapping the model the agent is started with; the
//! mechanical summarizer counts as compaction work); model seconds; invariant failures (an
//! independent `validate` of every compaction; must be 0); file paths from
//! `ledger_from_transcript` still named somewhere in the final conversation (must be all).
//!
//! `--mode recall` (or `both`) measures artifact recall instead of (or besides) replaying: one
//! manual compaction of the whole transcript per window, as `troupe compact` runs it (the
//! compression agent, the window's default policy: target 40 %, 5 recent messages protected),
//! then, per category (commands, error types, tests, paths, symbols), of the artifacts in the
//! transcript that the protected messages do not already name, how many the compacted
//! transcript still names (`troupe::transcript_ops::artifact_recall`, an extractor independent
//! of the compaction crate's own). A `--recall-missing` run lists the artifacts lost.
//!
//! ```text
//! cargo run --release --example eval -- --mode recall --model none --windows 8000,32000,128000
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_trait::async_trait;
use clap::Parser;
use troupe::agents::model::LocalModel;
use troupe::compaction::{
    BudgetPolicy, CompactOptions, ProtectedSet, TiktokenCounter, TokenCounter, compact,
    ledger_from_transcript,
};
use troupe::runtime::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, Conversation, MessageId, ModelError,
    ModelInfo,
};
use troupe::transcript_file::TranscriptFile;
use troupe::transcript_ops::{
    ArtifactCategory, CompactRequest, Compressor, RecallReport, ReplayObserver, ReplayedCompaction,
    TranscriptOpError, artifact_recall, compact_transcript, replay_transcript,
};

#[derive(Parser, Debug)]
#[command(
    about = "Replay a corpus of transcripts with automatic compaction and tabulate the result"
)]
struct Args {
    /// Folder of transcripts (`*.json`).
    #[arg(long, default_value = "../shared/corpus")]
    corpus: PathBuf,
    /// Write the markdown here (it is printed too).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Which summarizer: `none` (mechanical), `local` (the local model), or `both`.
    #[arg(long, default_value = "both")]
    model: String,
    /// Context windows, comma-separated.
    #[arg(long, default_value = "32000,128000", value_delimiter = ',')]
    windows: Vec<usize>,
    /// Only transcripts whose file name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Run the local model only on transcripts of at most this many tokens (it is slow).
    #[arg(long)]
    local_max_tokens: Option<usize>,
    /// What to measure: `replay` (the automatic-compaction replay table), `recall` (artifact
    /// recall after one manual compaction per window), or `both`.
    #[arg(long, default_value = "replay")]
    mode: String,
    /// With `--mode recall`/`both`: list the artifacts no longer named.
    #[arg(long)]
    recall_missing: bool,
}

/// Artifact recall after one manual compaction of one transcript at one window.
struct RecallRow {
    transcript: String,
    window: usize,
    model: String,
    /// Tokens before → after, and whether the target was reached.
    tokens: (usize, usize, bool),
    /// The recall, or why the compaction failed.
    recall: Result<RecallReport, String>,
}

/// One manual compaction of `input` at `window` through `compressor`, as `troupe compact` runs
/// it, and the artifact recall of its result.
async fn recall_row(
    name: &str,
    input: &TranscriptFile,
    window: usize,
    model: &str,
    compressor: &Compressor,
) -> anyhow::Result<RecallRow> {
    let defaults = BudgetPolicy::for_window(window);
    let request = CompactRequest {
        window,
        target: defaults.target,
        protected: defaults.protected_recent,
        instructions: None,
    };
    let mut row = RecallRow {
        transcript: name.to_string(),
        window,
        model: model.to_string(),
        tokens: (0, 0, false),
        recall: Err(String::new()),
    };
    let original_text = input.to_text()?;
    match compact_transcript(input, &original_text, &request, compressor).await {
        Ok(compacted) => {
            // The messages `compact_transcript` keeps verbatim whatever it does.
            let conversation = Conversation::from_messages(input.messages.iter().cloned());
            let protected_ids = ProtectedSet::compute(conversation.messages(), request.protected);
            let protected: Vec<ChatMessage> = conversation
                .messages()
                .iter()
                .filter(|m| protected_ids.contains(m.id))
                .cloned()
                .collect();
            let report = &compacted.report;
            row.tokens = (report.tokens_before, report.tokens_after, report.reached);
            row.recall = Ok(artifact_recall(
                &input.messages,
                &protected,
                &compacted.file.messages,
            ));
        }
        // Not worth writing for `troupe compact`, so nothing to measure here either.
        Err(e @ TranscriptOpError::DoesNotFit { .. }) => row.recall = Err(e.to_string()),
        Err(e) => return Err(e.into()),
    }
    Ok(row)
}

fn percent(kept: usize, total: usize) -> String {
    if total == 0 {
        "–".into()
    } else {
        format!("{:.1} %", 100.0 * kept as f64 / total as f64)
    }
}

/// One markdown table per transcript × window: the recall of each category and overall.
fn recall_tables(rows: &[RecallRow], list_missing: bool) -> String {
    let mut md = String::new();
    for r in rows {
        let (before, after, reached) = r.tokens;
        let _ = writeln!(
            md,
            "\n#### {} @ {}k ({}): {} → {} tokens{}\n",
            r.transcript,
            r.window / 1000,
            r.model,
            before,
            after,
            if reached { "" } else { " (target not reached)" }
        );
        let report = match &r.recall {
            Ok(report) => report,
            Err(why) => {
                let _ = writeln!(md, "No recall: {why}");
                continue;
            }
        };
        md.push_str("| category | artifacts | kept | recall | named by protected messages |\n");
        md.push_str("| --- | ---: | ---: | ---: | ---: |\n");
        for category in ArtifactCategory::ALL {
            if let Some(c) = report.category(category) {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} |",
                    category.label(),
                    c.total,
                    c.kept,
                    percent(c.kept, c.total),
                    c.named_by_protected
                );
            }
        }
        let all = report.overall();
        let _ = writeln!(
            md,
            "| **all** | {} | {} | **{}** | {} |",
            all.total,
            all.kept,
            percent(all.kept, all.total),
            all.named_by_protected
        );
        if list_missing {
            for (category, c) in &report.categories {
                if !c.missing.is_empty() {
                    let _ = writeln!(
                        md,
                        "\nNo longer named ({}): {}",
                        category.label(),
                        c.missing
                            .iter()
                            .map(|k| format!("`{}`", k.replace('`', "'")))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
            }
        }
    }
    md
}

/// A chat model that adds the time spent in its calls to a clock the replay's observer reads
/// (and resets) at every compaction: the compression agent's model time, tool loop and summaries
/// together.
struct TimedModel {
    inner: Arc<dyn ChatModel>,
    nanos: Arc<AtomicU64>,
}

#[async_trait]
impl ChatModel for TimedModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        let started = Instant::now();
        let out = self.inner.chat(request).await;
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
        out
    }
}

/// One replay of one transcript at one window with one summarizer.
#[derive(Debug, Default)]
struct Row {
    transcript: String,
    window: usize,
    model: String,
    messages: usize,
    raw_tokens: usize,
    peak_tokens: usize,
    final_tokens: usize,
    compactions: usize,
    skipped: usize,
    before: usize,
    after: usize,
    calls: usize,
    input_tokens: usize,
    output_tokens: usize,
    tier3_removed: usize,
    ms_excl_model: Vec<f64>,
    model_ms: f64,
    /// Local-model summaries replaced by the mechanical one.
    stand_ins: usize,
    not_reached: usize,
    invariant_failures: usize,
    paths_named: usize,
    paths_total: usize,
    missing_paths: Vec<String>,
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
    policy: &BudgetPolicy,
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
async fn replay(
    name: &str,
    input: &TranscriptFile,
    window: usize,
    label: &str,
    model: Option<Arc<dyn ChatModel>>,
) -> anyhow::Result<Row> {
    let policy = BudgetPolicy::for_window(window);
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
    let text = haystack(final_conversation.messages());
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

fn table(rows: &[Row]) -> String {
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

fn transcripts(corpus: &Path, only: Option<&str>) -> anyhow::Result<Vec<(String, TranscriptFile)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus)
        .with_context(|| format!("reading {}", corpus.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| {
            only.is_none_or(|o| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains(o))
            })
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok((name, TranscriptFile::read(&p)?))
        })
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (none, local) = match args.model.as_str() {
        "none" => (true, false),
        "local" => (false, true),
        "both" => (true, true),
        other => anyhow::bail!("--model must be none, local or both, not {other:?}"),
    };
    let (run_replay, run_recall) = match args.mode.as_str() {
        "replay" => (true, false),
        "recall" => (false, true),
        "both" => (true, true),
        other => anyhow::bail!("--mode must be replay, recall or both, not {other:?}"),
    };
    let inputs = transcripts(&args.corpus, args.only.as_deref())?;
    if inputs.is_empty() {
        anyhow::bail!("no transcripts in {}", args.corpus.display());
    }
    let counter = TiktokenCounter::default();
    let local_model: Option<Arc<dyn ChatModel>> = if local {
        let model = LocalModel::load_default()
            .await
            .context("loading the local model (use --model none to run without it)")?;
        Some(Arc::new(model))
    } else {
        None
    };
    let sizes: HashMap<String, usize> = inputs
        .iter()
        .map(|(n, f)| (n.clone(), counter.count_messages(&f.messages)))
        .collect();

    let started = Instant::now();
    let mut rows = Vec::new();
    let mut skipped_local = Vec::new();
    let mut recall_rows = Vec::new();
    if run_recall {
        let mut compressors = Vec::new();
        if none {
            compressors.push(("none", None));
        }
        if let Some(model) = &local_model {
            compressors.push(("local", Some(model.clone())));
        }
        for (label, model) in compressors {
            let compressor = Compressor::start(model, troupe::agents::shared_counter()).await?;
            for &window in &args.windows {
                for (name, input) in &inputs {
                    if label == "local"
                        && args
                            .local_max_tokens
                            .is_some_and(|max| sizes.get(name).copied().unwrap_or(0) > max)
                    {
                        continue;
                    }
                    eprintln!("{name} @ {window}: recall ({label})");
                    let row = recall_row(name, input, window, label, &compressor).await;
                    match row {
                        Ok(row) => recall_rows.push(row),
                        Err(e) => {
                            compressor.shutdown().await;
                            return Err(e);
                        }
                    }
                }
            }
            compressor.shutdown().await;
        }
    }
    for &window in args.windows.iter().filter(|_| run_replay) {
        for (name, input) in &inputs {
            if none {
                eprintln!("{name} @ {window}: none");
                rows.push(replay(name, input, window, "none", None).await?);
            }
            if let Some(model) = &local_model {
                if args
                    .local_max_tokens
                    .is_some_and(|max| sizes.get(name).copied().unwrap_or(0) > max)
                {
                    skipped_local.push(format!("{name} @ {}k", window / 1000));
                    continue;
                }
                eprintln!("{name} @ {window}: local");
                let t = Instant::now();
                let row = replay(name, input, window, "local", Some(model.clone())).await?;
                rows.push(row);
                eprintln!("  done in {:.1} s", t.elapsed().as_secs_f64());
                // The local model is slow: keep each finished row, in case the run is cut short.
                if let Some(last) = rows.last() {
                    eprint!("{}", table(std::slice::from_ref(last)));
                }
            }
        }
    }

    let mut md = if run_replay {
        table(&rows)
    } else {
        String::new()
    };
    let failures: usize = rows.iter().map(|r| r.invariant_failures).sum();
    let _ = writeln!(
        md,
        "\n{} replays and {} recall compactions in {:.1} s; invariant failures in total: {failures}.",
        rows.len(),
        recall_rows.len(),
        started.elapsed().as_secs_f64()
    );
    if !skipped_local.is_empty() {
        let _ = writeln!(
            md,
            "Local model not run on (over --local-max-tokens): {}.",
            skipped_local.join(", ")
        );
    }
    for r in rows.iter().filter(|r| r.model == "local" && r.calls > 0) {
        let _ = writeln!(
            md,
            "{} @ {}k: the mechanical summary stood in for {} of {} local-model summarizer answers.",
            r.transcript,
            r.window / 1000,
            r.stand_ins,
            r.calls
        );
    }
    for r in rows.iter().filter(|r| !r.missing_paths.is_empty()) {
        let _ = writeln!(
            md,
            "Paths no longer named in {} @ {}k ({}): {}",
            r.transcript,
            r.window / 1000,
            r.model,
            r.missing_paths.join(", ")
        );
    }
    if run_recall {
        md.push_str("\n### Artifact recall after one manual compaction\n");
        md.push_str(&recall_tables(&recall_rows, args.recall_missing));
    }
    println!("{md}");
    if let Some(out) = &args.out {
        std::fs::write(out, &md).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}
