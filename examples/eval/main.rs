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
//! The replay is `troupe_cli::transcript_ops::replay_transcript` itself (what `troupe replay` runs),
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
//! transcript still names — by issue #28's strict definition
//! (`troupe_cli::transcript_ops::strict_artifact_recall`: every path the agent named, in prose,
//! shell arguments and path arguments; every `…Error`/`…Exception` and `test_…` seen; symbols
//! declared; the first two words of every shell command) and by the lenient one
//! (`artifact_recall`); both extractors are independent of the compaction crate's own. A
//! `--recall-missing` run lists the artifacts lost (strict).
//!
//! ```text
//! cargo run --release --example eval -- --mode recall --model none --windows 32000,64000,128000
//! ```
//!
//! `--mode stall` measures how long live agents' turns wait on compaction (issue #30): every
//! transcript is lived twice by a real `LlmAgent` in a team with a compression agent — on the
//! background road (the compression agent works ahead, the default) and on the blocking road
//! (`WorkAhead::Off`) — with models that take realistic time (`stall/models.rs`: the agent's model
//! replays the transcript's assistant messages, the summarizer answers a fixed summary; agent
//! calls ~1 s, summarizer calls ~10 s, scaled by tokens, times `--time-scale`). The stall of a
//! compaction is the `waited_ms` the agent reports with `CompactionApplied`; every compaction is
//! validated from the agent's session log. `--json` prints one JSON line: all transcripts, the
//! dev and check splits (dev = pi-large-session, openhands-multi-swe-1, swe-marshmallow,
//! mini-swe-sqlfluff), and `by_window` (each window's splits apart: stall p50 / p99 / max and
//! the compaction events the eval could not attribute to a compaction, `stall/attribution.rs`);
//! without `--json` a table per transcript and window and one per split and window come first.
//! The windows default to 16k and 32k.
//!
//! ```text
//! cargo run --release --example eval -- --mode stall --json
//! cargo run --release --example eval -- --mode stall --stall-windows 8000,16000 --time-scale 0.05 --only swe-
//! cargo run --release --example eval -- --mode stall --work-ahead 0.6 --json    # work ahead from 60 %
//! cargo run --release --example eval -- --mode stall --at-limit wait --json      # wait at the limit
//! scripts/stall-llama-server.sh                                                 # against llama-server on 127.0.0.1
//! ```
//!
//! `--mode peers` puts troupe's compaction side by side with the field's (issue #31): every
//! transcript lived by `troupe` (the replay above) and by `claude-code`, `codex`, `pi` and
//! `openhands-masking` emulated from their documentation, all with the mechanical summarizer;
//! every prompt billed through the OpenAI and Anthropic prompt-cache emulations; per row the
//! billed input tokens, cache hit rate, compactions, strict artifact recall after each
//! compaction, the largest prompt and whether tool pairs held (`peers/`). `--bar` exits
//! non-zero when some peer is both cheaper than troupe and at least as good on recall.
//!
//! ```text
//! cargo run --release --example eval -- --mode peers --json
//! cargo run --release --example eval -- --mode peers --windows 32000 --only pi-large --bar
//! ```

mod peers;
mod recall;
mod replay;
mod stall;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use clap::Parser;
use troupe::agents::{AtLimit, WorkAhead};
use troupe::models::{LocalModel, OpenAiConfig, OpenAiModel};
use troupe::protocol::ChatModel;
use troupe::tokens::{TiktokenCounter, TokenCounter};
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::Compressor;

use recall::{recall_row, recall_tables, strict_table};
use replay::{replay, table};

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
    /// recall after one manual compaction per window), `both`, or `stall` (how long live agents
    /// wait on compaction, background vs blocking road).
    #[arg(long, default_value = "replay")]
    mode: String,
    /// With `--mode recall`/`both`: list the artifacts no longer named.
    #[arg(long)]
    recall_missing: bool,
    /// With `--mode stall`: the context windows the agents get, comma-separated.
    #[arg(long, default_value = "16000,32000", value_delimiter = ',')]
    stall_windows: Vec<usize>,
    /// With `--mode stall`: every model call sleeps its realistic time times this.
    #[arg(long, default_value_t = 0.02)]
    time_scale: f64,
    /// With `--mode stall`: time the models by a real OpenAI-compatible server at this base URL
    /// (e.g. `http://127.0.0.1:8080/v1`, a llama.cpp `llama-server`) instead of the latency
    /// formula: the agent's calls are sent there too, the summarizer is that model.
    #[arg(long)]
    server: Option<String>,
    /// With `--mode stall`: when the background road works ahead: `warning` (the default
    /// threshold, 70 %) or a fraction of the window (`0.6`).
    #[arg(long, default_value = "warning")]
    work_ahead: String,
    /// With `--mode stall`: what the background road's agent does at the limit before an
    /// answer landed: `make_room` (the default: at once, without a model) or `wait` (for the
    /// job in flight, or the compression agent).
    #[arg(long, default_value = "make_room")]
    at_limit: String,
    /// With `--server`: the model name sent to it.
    #[arg(long, default_value = "smollm2-135m")]
    server_model: String,
    /// With `--mode stall` or `peers`: print one JSON line (else a markdown table and the JSON
    /// line).
    #[arg(long)]
    json: bool,
    /// With `--mode peers`: exit non-zero when the bar fails (a peer both cheaper than troupe
    /// and at least as good on artifact recall).
    #[arg(long)]
    bar: bool,
}

/// The transcripts changes were developed on; the others are the check split. Of the two
/// mini-swe-agent trajectories (#42), mini-swe-sqlfluff is dev, mini-swe-astroid check.
const DEV: [&str; 4] = [
    "pi-large-session",
    "openhands-multi-swe-1",
    "swe-marshmallow",
    "mini-swe-sqlfluff",
];

/// `--mode stall`: both roads, every transcript, every window; one JSON line.
async fn stall_mode(args: &Args, inputs: &[(String, TranscriptFile)]) -> anyhow::Result<()> {
    if !args.time_scale.is_finite() || args.time_scale <= 0.0 {
        anyhow::bail!("--time-scale must be positive");
    }
    let clock = match &args.server {
        None => stall::Clock::Formula(args.time_scale),
        Some(url) => {
            let config = OpenAiConfig::new(url.clone(), args.server_model.clone())
                .with_request_timeout(std::time::Duration::from_secs(600));
            stall::Clock::Server(Arc::new(OpenAiModel::new(config)?))
        }
    };
    let work_ahead = match args.work_ahead.as_str() {
        "warning" => WorkAhead::AtWarning,
        fraction => WorkAhead::At(
            fraction
                .parse()
                .context("--work-ahead takes `warning` or a fraction of the window")?,
        ),
    };
    let at_limit = match args.at_limit.as_str() {
        "make_room" => AtLimit::MakeRoom,
        "wait" => AtLimit::Wait,
        other => anyhow::bail!("--at-limit takes `make_room` or `wait`, not `{other}`"),
    };
    let dir = stall::log_dir();
    std::fs::create_dir_all(&dir)?;
    let mut rows = Vec::new();
    for &window in &args.stall_windows {
        for (name, input) in inputs {
            let split = if DEV.contains(&name.as_str()) {
                "dev"
            } else {
                "check"
            };
            eprintln!("{name} @ {window}: background road");
            let background =
                stall::run_road(input, window, (work_ahead, at_limit), &clock, &dir).await?;
            eprintln!("{name} @ {window}: blocking road");
            let blocking =
                stall::run_road(input, window, (WorkAhead::Off, at_limit), &clock, &dir).await?;
            rows.push(stall::StallRow {
                transcript: name.clone(),
                split,
                window,
                background,
                blocking,
            });
        }
    }
    // TROUPE_EVAL_KEEP_LOGS keeps the agents' session logs (the last replay of each road).
    if std::env::var_os("TROUPE_EVAL_KEEP_LOGS").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let all: Vec<&stall::StallRow> = rows.iter().collect();
    // Against a server nothing is scaled.
    let scale = if args.server.is_some() {
        1.0
    } else {
        args.time_scale
    };
    let mut line = stall::summary(&all, scale);
    for split in ["dev", "check"] {
        let part: Vec<&stall::StallRow> = rows.iter().filter(|r| r.split == split).collect();
        line[split] = stall::summary(&part, scale);
    }
    // Each window apart too: how much a window leaves between the work-ahead threshold and the
    // limit, against the largest single steps of a transcript, decides whether a job can land
    // before the limit (a 16k window's band is 4.8k tokens; one tool result can be 10k).
    let mut by_window = serde_json::Map::new();
    for &window in &args.stall_windows {
        let mut at = serde_json::Map::new();
        for split in ["dev", "check"] {
            let part: Vec<&stall::StallRow> = rows
                .iter()
                .filter(|r| r.split == split && r.window == window)
                .collect();
            let s = stall::summary(&part, scale);
            at.insert(
                split.into(),
                serde_json::json!({
                    "transcripts": part.len(),
                    "stall_ms_p50": s["stall_ms_p50"],
                    "stall_ms_p99": s["stall_ms_p99"],
                    "stall_ms_max": s["stall_ms_max"],
                    "background_waits_over_10ms": s["background_waits_over_10ms"],
                    "background_road_by_mode": s["background_road_by_mode"],
                    "blocking_stall_ms_p50": s["blocking_stall_ms_p50"],
                    "compactions": s["compactions"],
                    "invariants_ok": s["invariants_ok"],
                    "unattributed": s["unattributed"].as_array().map_or(0, Vec::len),
                }),
            );
        }
        by_window.insert(window.to_string(), serde_json::Value::Object(at));
    }
    line["by_window"] = serde_json::Value::Object(by_window);
    line["time_scale"] = serde_json::json!(scale);
    line["work_ahead"] = serde_json::json!(format!("{work_ahead:?}"));
    line["model"] = match &args.server {
        None => serde_json::json!(stall::latency_description()),
        Some(url) => serde_json::json!(format!(
            "server {url} (model {}): the agent's calls are sent there (flattened prompt, as many tokens as the transcript's answer) and answered from the transcript; the summarizer is the served model",
            args.server_model
        )),
    };
    if !args.json {
        println!("{}", stall::stall_table(&rows));
        println!("{}", stall::split_window_table(&rows, &args.stall_windows));
    }
    println!("{}", serde_json::to_string(&line)?);
    Ok(())
}

/// `--mode peers`: every strategy, transcript and window; one JSON line. Without a corpus there
/// is nothing to compare: it says so and succeeds (tests run without one).
async fn peers_mode(args: &Args) -> anyhow::Result<()> {
    let inputs = if args.corpus.is_dir() {
        transcripts(&args.corpus, args.only.as_deref())?
    } else {
        Vec::new()
    };
    if inputs.is_empty() {
        eprintln!(
            "no transcripts in {}: nothing to compare (the peers mode reads the corpus at run time; pass --corpus DIR)",
            args.corpus.display()
        );
        return Ok(());
    }
    let ok = peers::run(&inputs, &args.windows, &DEV, args.json).await?;
    if args.bar && !ok {
        // The JSON line is out; the rows that beat troupe were listed on stderr.
        std::process::exit(1);
    }
    Ok(())
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
    if args.mode == "peers" {
        return peers_mode(&args).await;
    }
    if args.mode == "stall" {
        let inputs = transcripts(&args.corpus, args.only.as_deref())?;
        if inputs.is_empty() {
            anyhow::bail!("no transcripts in {}", args.corpus.display());
        }
        return stall_mode(&args, &inputs).await;
    }
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
        other => {
            anyhow::bail!("--mode must be replay, recall, both, stall or peers, not {other:?}")
        }
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
        md.push_str("\n### Strict artifact recall after one manual compaction (issue #28)\n\n");
        md.push_str(&strict_table(&recall_rows));
        md.push_str("\n### Per transcript and window\n");
        md.push_str(&recall_tables(&recall_rows, args.recall_missing));
    }
    println!("{md}");
    if let Some(out) = &args.out {
        std::fs::write(out, &md).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}
