//! `troupe compact`, `troupe expand`, `troupe replay`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use indicatif::ProgressBar;
use tracing::Instrument;
use troupe::agents::shared_counter;
use troupe::protocol::CompactionReport;
use troupe::protocol::TierCounts;
use troupe::protocol::trace::semconv;
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::{
    Compressor, CostMeter, ReplayCost, ReplayObserver, ReplayReport, RestoredMatch, check_window,
    compact_transcript, ensure_distinct_files, expand_transcript_file, replay_transcript,
    transcript_policy,
};

use crate::cli::{CompactArgs, ExpandArgs, ReplayArgs};
use crate::summarizer::compaction_model;

fn default_archive_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    out.with_file_name(format!("{stem}.archive.jsonl"))
}

fn tiers_text(t: &TierCounts) -> String {
    let parts: Vec<String> = [
        ("truncated", t.truncated),
        ("masked", t.masked),
        ("display-only removed", t.display_only_removed),
        ("per-message summarized", t.per_message_summarized),
        ("segment summaries", t.segment_summaries),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(what, n)| format!("{what} {n}"))
    .collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(" · ")
    }
}

fn print_report(r: &CompactionReport, out: &Path, archive: &Path) {
    let percent = |tokens: usize| tokens * 100 / r.context_window.max(1);
    println!(
        "tokens      {} → {} ({}% → {}% of {}; target {})",
        r.tokens_before,
        r.tokens_after,
        percent(r.tokens_before),
        percent(r.tokens_after),
        r.context_window,
        r.target_tokens
    );
    println!(
        "target      {}",
        if r.reached { "reached" } else { "NOT reached" }
    );
    println!("tiers       {}", tiers_text(&r.tiers));
    if r.tiers.summarized_messages > 0 {
        println!("summarized  {} messages", r.tiers.summarized_messages);
    }
    println!(
        "summarizer  {} call(s), {} in / {} out tokens",
        r.summarizer.calls, r.summarizer.input_tokens, r.summarizer.output_tokens
    );
    println!("protected   {} messages", r.protected);
    println!(
        "archived    {} originals → {}",
        r.archived,
        archive.display()
    );
    println!("written     {}", out.display());
    println!("time        {:.0} ms", r.duration_ms);
    println!("why         {}", r.reason);
    for fallback in &r.fallbacks {
        println!("fallback    {fallback}");
    }
}

pub async fn compact(args: CompactArgs) -> anyhow::Result<()> {
    let archive_path = args
        .archive
        .clone()
        .unwrap_or_else(|| default_archive_path(&args.out));
    // Before any work (a model summary can take minutes): refuse outputs that would overwrite
    // the input or each other. `write_files` checks again right before writing.
    ensure_distinct_files(&[
        ("the input", &args.input),
        ("--out", &args.out),
        ("--archive", &archive_path),
    ])?;
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("reading {}", args.input.display()))?;
    let input = TranscriptFile::parse(&args.input, &text)?;
    let policy = transcript_policy(args.window, args.target, args.protected)?;
    let compressor =
        Compressor::start(compaction_model(args.model).await?, shared_counter()).await?;
    let spinner = crate::progress::spinner("compacting");
    // The command's span: the compression agent's work is traced beneath it, as one trace.
    let span = tracing::info_span!(
        "compact_transcript",
        { semconv::INPUT } = %args.input.display(),
        { semconv::WINDOW } = args.window,
    );
    let result = compact_transcript(&input, &text, &policy, args.focus.clone(), &compressor)
        .instrument(span)
        .await;
    spinner.finish_and_clear();
    compressor.shutdown().await;
    let result = result?;
    result.write_files(&args.input, &args.out, &archive_path)?;
    if args.json {
        let json = serde_json::json!({
            "input": args.input,
            "out": args.out,
            "archive": archive_path,
            "messages_before": input.messages.len(),
            "messages_after": result.file.messages.len(),
            "report": result.report,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!(
            "compacted   {} ({} messages) → {} messages",
            args.input.display(),
            input.messages.len(),
            result.file.messages.len()
        );
        print_report(&result.report, &args.out, &archive_path);
    }
    Ok(())
}

pub fn expand(args: ExpandArgs) -> anyhow::Result<()> {
    let _span = tracing::info_span!(
        "expand_transcript",
        { semconv::INPUT } = %args.input.display(),
        { semconv::ARCHIVE } = %args.archive.display(),
    )
    .entered();
    let expanded = expand_transcript_file(&args.input, &args.archive, &args.out)?;
    println!(
        "restored    {} → {}",
        args.input.display(),
        args.out.display()
    );
    if expanded.compacted_layout_changed {
        println!(
            "input       {}'s layout or envelope changed since compaction; its messages did not",
            args.input.display()
        );
    }
    match expanded.restored {
        RestoredMatch::IdenticalFile => {
            println!("checksum    identical to the original (sha256 recorded at compaction)")
        }
        RestoredMatch::IdenticalMessages => println!(
            "checksum    messages identical to the original's (sha256 of the messages recorded at \
             compaction); the file's layout or envelope (whitespace, key order, other top-level keys) \
             differs from the original file's"
        ),
    }
    Ok(())
}

fn print_replay(r: &ReplayReport) {
    println!(
        "window {} · trigger {} tokens · {} tokens kept for each answer · {} messages · {} tokens uncompacted",
        r.window, r.trigger_tokens, r.output_reserve, r.messages, r.raw_tokens
    );
    if r.compactions.is_empty() && r.skipped == 0 {
        println!("no compaction was needed");
    } else if r.compactions.is_empty() {
        println!(
            "no compaction ran: {} automatic trigger(s) skipped; last: {}",
            r.skipped,
            r.last_skip_reason.as_deref().unwrap_or("?")
        );
    } else {
        println!(
            "{:>4} {:>8} {:>8} {:>8}  {:>5} {:>9}  {:<10}  tiers",
            "#", "at msg", "before", "after", "calls", "ms", "invariants"
        );
        for (i, row) in r.compactions.iter().enumerate() {
            println!(
                "{:>4} {:>8} {:>8} {:>8}  {:>5} {:>9.1}  {:<10}  {}{}{}",
                i + 1,
                row.at_message,
                row.tokens_before,
                row.tokens_after,
                row.summarizer_calls,
                row.ms,
                if row.invariants_ok { "ok" } else { "VIOLATED" },
                tiers_text(&row.tiers),
                if row.trigger == troupe::protocol::CompactTrigger::Emergency {
                    "  (emergency: the request would not fit the window)"
                } else {
                    ""
                },
                if row.reached {
                    String::new()
                } else {
                    format!("  (target not reached: {})", row.reason)
                }
            );
        }
    }
    println!(
        "totals: {} compaction(s), {} skipped (thrash guard or minimum gain), {} summarizer call(s), {:.1} ms; peak {} tokens, largest model call {} tokens, final {} tokens; invariants {}",
        r.compactions.len(),
        r.skipped,
        r.summarizer_calls,
        r.ms,
        r.peak_tokens,
        r.max_prompt_tokens,
        r.final_tokens,
        if r.invariants_ok { "ok" } else { "VIOLATED" }
    );
}

/// `--cost`: the session's bill and each compaction's receipt.
fn print_cost(r: &ReplayReport, cost: &ReplayCost) {
    println!(
        "cost ({}: input {}, cached {}, write {}; calls {} s apart): {} agent call(s) + {} compaction call(s), {} input tokens",
        cost.model,
        cost.input_rate,
        cost.cached_rate,
        cost.write_rate,
        cost.call_spacing_secs,
        cost.agent_calls,
        cost.compaction_calls,
        cost.input_tokens
    );
    println!(
        "billed {:.0} input-token equivalents of {:.0} uncached ({:.1} %); cache hit {:.1} %; compaction calls billed {:.0}",
        cost.billed,
        cost.uncached,
        100.0 * cost.billed / cost.uncached.max(1.0),
        100.0 * cost.cache_hit,
        cost.compaction_billed
    );
    if r.compactions.is_empty() {
        return;
    }
    println!(
        "{:>4} {:>8} {:>8} {:>10} {:>10} {:>7} {:>11}",
        "#", "before", "after", "kept", "re-billed", "turns", "net saving"
    );
    for (i, receipt) in r
        .compactions
        .iter()
        .filter_map(|row| row.receipt.as_ref())
        .enumerate()
    {
        println!(
            "{:>4} {:>8} {:>8} {:>10} {:>10} {:>7.1} {:>11.0}",
            i + 1,
            receipt.tokens_before,
            receipt.tokens_after,
            receipt.cached_prefix_kept,
            receipt.rebilled_tokens,
            receipt.expected_turns,
            receipt.net_saving
        );
    }
    println!(
        "compactions re-billed {} tokens in all; net saving {:.0}",
        cost.rebilled_tokens, cost.net_saving
    );
}

/// Moves the progress bar as a replay feeds messages.
struct ReplayProgress<'a>(&'a ProgressBar);

impl ReplayObserver for ReplayProgress<'_> {
    fn on_message(&mut self, fed: usize) {
        self.0.set_position(fed as u64);
    }
}

pub async fn replay(args: ReplayArgs) -> anyhow::Result<()> {
    check_window(args.window)?;
    let input = TranscriptFile::read(&args.input)?;
    let policy = troupe::compaction::ContextPolicy::for_window(args.window);
    policy.validate()?;
    let counter = shared_counter();
    let compressor =
        Compressor::start(compaction_model(args.model).await?, counter.clone()).await?;
    let bar = crate::progress::bar(input.messages.len() as u64, "replaying");
    let span = tracing::info_span!(
        "replay_transcript",
        { semconv::INPUT } = %args.input.display(),
        { semconv::WINDOW } = args.window,
    );
    let cost = match (args.cost, &args.rates) {
        (Some(model), Some(spec)) => Some(model.with_rates(model.rates().with_overrides(spec)?)),
        (model, _) => model,
    };
    // With `--cost`, a meter bills every model call as the replay goes (and moves the bar).
    let (mut progress, mut metered_progress) = (ReplayProgress(&bar), ReplayProgress(&bar));
    let mut meter = cost.map(|model| {
        CostMeter::new(
            &input.messages,
            &policy,
            counter.as_ref(),
            model,
            &mut metered_progress,
        )
    });
    let observer: &mut dyn ReplayObserver = match meter.as_mut() {
        Some(meter) => meter,
        None => &mut progress,
    };
    let report = replay_transcript(&input, &policy, counter.as_ref(), &compressor, observer)
        .instrument(span)
        .await;
    bar.finish_and_clear();
    compressor.shutdown().await;
    let mut report = report?;
    if let Some(meter) = meter {
        meter.finish(&mut report);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_replay(&report);
        if let Some(cost) = &report.cost {
            print_cost(&report, cost);
        }
    }
    if !report.invariants_ok {
        anyhow::bail!("an invariant was violated during the replay");
    }
    Ok(())
}
