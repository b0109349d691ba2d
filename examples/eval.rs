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
//! The replay is the loop of `troupe::transcript_ops::replay_transcript` (what `troupe replay`
//! runs): feed the transcript message by message; before every assistant message, when the
//! live conversation is at or over the trigger, run an automatic compaction (with the thrash
//! guard) and apply it. It is repeated here rather than called because the evaluation needs what
//! that function's report does not carry: the final conversation (to check that every file path
//! is still named), the summarizer's token usage per compaction, and the messages tier 3
//! replaced. For `--model none` each replay is cross-checked against `replay_transcript` (same
//! compactions, same final token count) and the row says so.
//!
//! Columns: compactions run (and automatic triggers the thrash guard skipped); tokens of the
//! live conversation at its peak and at the end, and of the uncompacted transcript; summarizer
//! calls and input/output tokens; "tier-3 removed": the tokens of the messages that summaries
//! replaced, counted as they stood after tiers 1–2 (a tiers-1–2-only pass over the same input),
//! and the summarizer input over it (goal ≤ 1.2); median milliseconds per compaction excluding
//! model time (the summarizer is wrapped and its time subtracted; the mechanical summarizer
//! counts as compaction work); invariant failures (an independent `validate` of every
//! compaction; must be 0); file paths from `ledger_from_transcript` still named somewhere in
//! the final conversation (must be all).
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
use troupe::agents::compression::ModelSummarizer;
use troupe::agents::model::LocalModel;
use troupe::compaction::{
    BudgetPolicy, CompactOptions, CompactTrigger, MechanicalSummarizer, ProtectedSet, Summarizer,
    SummarizerError, SummaryPrompt, ThrashGuard, TiktokenCounter, TokenCache, TokenCounter,
    compact, ledger_from_transcript, validate,
};
use troupe::runtime::{ChatMessage, ChatModel, Conversation, MessageId, Role};
use troupe::transcript_file::TranscriptFile;
use troupe::transcript_ops::{
    ArtifactCategory, CompactRequest, Compressor, RecallReport, TranscriptOpError, artifact_recall,
    compact_transcript, replay_transcript,
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

/// A summarizer wrapper that measures the time spent inside the wrapped summarizer.
struct Timed<'a> {
    inner: &'a dyn Summarizer,
    nanos: AtomicU64,
}

impl<'a> Timed<'a> {
    fn new(inner: &'a dyn Summarizer) -> Self {
        Timed {
            inner,
            nanos: AtomicU64::new(0),
        }
    }

    fn take(&self) -> Duration {
        Duration::from_nanos(self.nanos.swap(0, Ordering::Relaxed))
    }
}

#[async_trait]
impl Summarizer for Timed<'_> {
    fn context_window(&self) -> usize {
        self.inner.context_window()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn summarize(&self, prompt: SummaryPrompt) -> Result<String, SummarizerError> {
        let started = Instant::now();
        let out = self.inner.summarize(prompt).await;
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
    fallbacks: usize,
    /// Local-model summaries replaced by the mechanical one.
    stand_ins: usize,
    not_reached: usize,
    invariant_failures: usize,
    paths_named: usize,
    paths_total: usize,
    missing_paths: Vec<String>,
    cross_check: Option<bool>,
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
/// `conversation` but gone from `result`, counted as they stand after tiers 1–2.
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

async fn replay(
    name: &str,
    input: &TranscriptFile,
    window: usize,
    model: &str,
    summarizer: &dyn Summarizer,
    counter: &TiktokenCounter,
) -> anyhow::Result<Row> {
    let policy = BudgetPolicy::for_window(window);
    policy.validate()?;
    let timed = Timed::new(summarizer);
    let cache = TokenCache::new();
    let mut conversation = Conversation::new();
    let mut guard = ThrashGuard::new();
    let mut row = Row {
        transcript: name.to_string(),
        window,
        model: model.to_string(),
        messages: input.messages.len(),
        ..Row::default()
    };
    let messages = &input.messages;
    for (i, message) in messages.iter().enumerate() {
        conversation.push(message.clone());
        let tokens = cache.count_messages(counter, conversation.messages()).total;
        row.peak_tokens = row.peak_tokens.max(tokens);
        let model_turn_next = messages
            .get(i + 1)
            .is_some_and(|next| next.role == Role::Assistant);
        if !model_turn_next || tokens < policy.trigger_tokens() {
            continue;
        }
        let ledger = ledger_from_transcript(conversation.messages());
        let options = CompactOptions {
            trigger: CompactTrigger::Automatic,
            guard: Some(guard),
            token_cache: Some(cache.clone()),
            ..CompactOptions::default()
        };
        timed.take();
        let started = Instant::now();
        let result = compact(
            &conversation,
            &ledger,
            &policy,
            counter,
            Some(&timed),
            options,
        )
        .await?;
        let total = started.elapsed();
        let model_time = timed.take();
        guard.record(&result.report);
        if !result.changed() {
            row.skipped += 1;
            continue;
        }
        let ok = validate(
            conversation.messages(),
            &result.messages,
            &result.archive,
            &policy,
            counter,
        )
        .is_ok();
        let report = &result.report;
        row.compactions += 1;
        row.invariant_failures += usize::from(!ok);
        row.before += report.tokens_before;
        row.after += report.tokens_after;
        row.calls += report.summarizer.calls;
        row.input_tokens += report.summarizer.input_tokens;
        row.output_tokens += report.summarizer.output_tokens;
        row.fallbacks += report.fallbacks.len();
        row.not_reached += usize::from(!report.reached);
        if report.summarizer.calls > 0 {
            row.tier3_removed +=
                tier3_removed(&conversation, &result.messages, &policy, counter).await?;
        }
        let excluded = if model == "none" {
            Duration::ZERO
        } else {
            model_time
        };
        row.ms_excl_model
            .push(total.saturating_sub(excluded).as_secs_f64() * 1000.0);
        row.model_ms += model_time.as_secs_f64() * 1000.0;
        eprintln!(
            "  {name} @ {window} ({model}): compaction at message {}: {} → {} tokens, {} summarizer call(s), {:.1} s in the summarizer",
            i + 1,
            report.tokens_before,
            report.tokens_after,
            report.summarizer.calls,
            model_time.as_secs_f64()
        );
        result.apply_to(&mut conversation);
    }
    row.final_tokens = cache.count_messages(counter, conversation.messages()).total;
    row.raw_tokens = counter.count_messages(messages);

    let paths = ledger_from_transcript(messages).all_files();
    let text = haystack(conversation.messages());
    row.paths_total = paths.len();
    for path in paths {
        if text.contains(path.as_str()) {
            row.paths_named += 1;
        } else {
            row.missing_paths.push(path);
        }
    }

    if model == "none" {
        // `replay_transcript` compacts through a compression agent (the CLI's road).
        let compressor = Compressor::start(None, troupe::agents::shared_counter()).await?;
        let reference = replay_transcript(input, &policy, counter, &compressor, |_| {}).await;
        compressor.shutdown().await;
        let reference = reference?;
        row.cross_check = Some(
            reference.compactions.len() == row.compactions
                && reference.final_tokens == row.final_tokens
                && reference.skipped == row.skipped,
        );
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
            "| {} | {}k | {}{} | {} | {} ({}) | {} → {} ({}) | {} → {} | {} | {} | {} / {} | {} | {} | {} | {} | {}{} | {}/{} |",
            r.transcript,
            r.window / 1000,
            r.model,
            match r.cross_check {
                Some(true) => " ✓",
                Some(false) => " ✗",
                None => "",
            },
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
    let mechanical = MechanicalSummarizer::new();
    let local_model: Option<Arc<dyn ChatModel>> = if local {
        let model = LocalModel::load_default()
            .await
            .context("loading the local model (use --model none to run without it)")?;
        Some(Arc::new(model))
    } else {
        None
    };
    let local_summarizer = local_model
        .clone()
        .filter(|_| run_replay)
        .map(ModelSummarizer::new);
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
                rows.push(replay(name, input, window, "none", &mechanical, &counter).await?);
            }
            if let Some(summarizer) = &local_summarizer {
                if args
                    .local_max_tokens
                    .is_some_and(|max| sizes.get(name).copied().unwrap_or(0) > max)
                {
                    skipped_local.push(format!("{name} @ {}k", window / 1000));
                    continue;
                }
                eprintln!("{name} @ {window}: local");
                let t = Instant::now();
                let mut row = replay(name, input, window, "local", summarizer, &counter).await?;
                // Answers the mechanical summary stood in for (skeleton, transcript echo, error).
                row.stand_ins = summarizer.take_fallbacks().len();
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
    if rows.iter().any(|r| r.cross_check == Some(false)) {
        md.push_str(
            "✗: this replay differs from `replay_transcript`'s (see the example's header).\n",
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
