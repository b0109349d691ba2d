//! An agent reads one source file after another from this repository (`crates/`) until its
//! conversation nears its usable window, and compaction shrinks it. Prints the tokens before and
//! after every compaction, whether its result landed in the conversation, and the summary that
//! replaced older messages when one did.
//!
//! Run it:
//!
//! ```text
//! cargo run --example long_session                 # default model (local llama.cpp, or OpenAI if configured)
//! cargo run --example long_session -- --scripted   # scripted reads and summaries, no LLM at all
//! TROUPE_TRACE=long.jsonl cargo run --example long_session -- --scripted && cargo run -- trace long.jsonl
//! ```
//!
//! The budget is deliberately tiny (a 6,000-token window: warning at 70 %, compaction at 80 %,
//! target 5 %) so that compaction triggers after a few reads. The agent works ahead (the
//! default): from the warning on a compaction runs in the background; a read that takes the
//! conversation past what the window holds makes room at once (old file contents become stubs
//! naming the file, kept in the archive for `recall`), and a background job still running is
//! dropped as stale. With `--scripted` the stubs leave the conversation small enough that no
//! summary is needed; longer answers (a real model's) leave older turns to summarize. Each file
//! is its own request
//! (`Read FILE with read_file: {"path": "FILE"}`): a 135M model cannot plan a series of reads,
//! but after each user message its tool call is forced and grammar-constrained, so it reliably
//! calls `read_file` (the path it picks may still be wrong). With `--scripted` the model calls
//! `read_file` on the file and answers in one line.
//! Of the built-in file tools the agent only keeps `read_file`, so no model can edit the
//! repository and the forced call is always a read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::broadcast;
use troupe::agents::compression::CompressionConfig;
use troupe::agents::compression::CompressorModel;
use troupe::agents::{CompactionSettings, LlmAgent};

use troupe::compaction::ContextPolicy;
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::protocol::MessageKind;
use troupe::{AgentSpec, Team, ToolRegistry};
use troupe::{Event, EventRecord, TeamConfig};

/// The files to read, relative to `crates/` (about 10k tokens in all).
const FILES: [&str; 6] = [
    "protocol/src/message.rs",
    "protocol/src/event.rs",
    "protocol/src/model.rs",
    "protocol/src/trace.rs",
    "tools/src/result.rs",
    "protocol/src/ledger.rs",
];

/// The agent's (pretend) context window in tokens: small, so compaction comes early.
const WINDOW: usize = 6_000;

const AGENT: &str = "reader";

fn policy() -> ContextPolicy {
    ContextPolicy {
        context_window: WINDOW,
        target: 0.05,
        protected_recent: 4,
        tool_output_limit_tokens: 1_500,
        min_freeable_tokens: 500,
        summary_max_tokens: 300,
        // The 5 % target as written: automatic compactions would otherwise aim at the
        // cost-aware target, somewhere between 20 % and 60 % of the window.
        cost_aware: false,
        ..ContextPolicy::default()
    }
}

/// The built-in file tools, reduced to `read_file`: nothing can edit the repository, and the
/// local model's forced tool call can only be a read (with every file tool on offer, the 135M
/// model picks `list_dir` or `grep` as often as not).
fn read_only_file_tools() -> ToolRegistry {
    let mut tools = ToolRegistry::with_file_tools();
    for name in ["write_file", "edit_file", "list_dir", "grep"] {
        tools.remove(name);
    }
    tools
}

/// The agent's model and the compression agent's model (`None`: the agent's own).
async fn models(scripted: bool) -> anyhow::Result<(Arc<dyn ChatModel>, CompressorModel)> {
    if !scripted {
        let model = troupe::models::default_model()
            .await
            .context("loading the default model")?;
        return Ok((model, CompressorModel::AgentsOwn));
    }
    // Per request: one read_file call, then a one-line answer.
    let script = FILES.iter().flat_map(|f| {
        [
            ScriptedReply::call("read_file", format!(r#"{{"path": "{f}"}}"#)),
            ScriptedReply::text(format!("{f} defines part of the troupe API.")),
        ]
    });
    let reader = ScriptedModel::new("scripted-reader", script);
    // The compression agent's tool loop gets a plain answer (its deterministic planner then does
    // the work) and every segment summary is this text, in the sections a summary must have (an
    // answer without them is not trusted, and the mechanical summary would stand in).
    let summarizer = ScriptedModel::new("scripted-summarizer", []).with_fallback(
        "## Goal\n\
         Read the protocol and tools source files with read_file and say what each is for.\n\
         ## Constraints & Preferences\n\
         Only read_file; one sentence per file.\n\
         ## Progress\n\
         ### Done\n\
         Read protocol/src/message.rs and protocol/src/event.rs: each defines part of the troupe API.\n\
         ### In Progress\n\
         Reading the next file with read_file.\n\
         ### Blocked\n\
         Nothing.\n\
         ## Key Decisions\n\
         Each file is read in its own request.\n\
         ## Next Steps\n\
         Read the remaining protocol and tools files.\n\
         ## Critical Context\n\
         The files are under crates/.",
    );
    Ok((
        Arc::new(reader),
        CompressorModel::Fixed(Arc::new(summarizer)),
    ))
}

/// Print the compaction events received so far; returns how many compactions finished.
fn print_compactions(events: &mut broadcast::Receiver<EventRecord>) -> usize {
    let mut finished = 0;
    loop {
        match events.try_recv() {
            Ok(record) => match record.event {
                Event::ContextWarning { tokens, window, .. } => {
                    println!("  context warning: {tokens} of {window} tokens");
                }
                Event::CompactionStarted {
                    tokens, trigger, ..
                } => {
                    println!("  compaction started ({trigger}) at {tokens} tokens");
                }
                Event::CompactionFinished { report, .. } => {
                    finished += 1;
                    println!(
                        "  compaction finished: {} -> {} tokens (target {}): {}",
                        report.tokens_before,
                        report.tokens_after,
                        report.target_tokens,
                        report.reason
                    );
                }
                Event::CompactionFailed { reason, .. } => {
                    println!("  compaction failed: {reason}");
                }
                Event::CompactionApplied {
                    mode,
                    applied,
                    reason,
                    ..
                } => {
                    println!(
                        "  compaction ({}) {}{}",
                        format!("{mode:?}").to_lowercase(),
                        if applied { "applied" } else { "dropped" },
                        reason.map(|r| format!(": {r}")).unwrap_or_default()
                    );
                }
                _ => {}
            },
            Err(broadcast::error::TryRecvError::Lagged(n)) => {
                println!("  ({n} events missed)");
            }
            Err(_) => return finished,
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = troupe::telemetry::init()?;
    let scripted = std::env::args().any(|a| a == "--scripted");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates");
    let (model, compression_model) = models(scripted).await?;
    println!(
        "model: {} · workspace: {} · budget: {WINDOW} tokens (compaction at 80 %, target 5 %)",
        model.info().name,
        root.display()
    );

    // A local model on a CPU re-reads the whole conversation on every call, and compaction
    // calls it too: allow more than the default 300 s per request.
    let team = Team::builder()
        .config(TeamConfig {
            ask_timeout: Duration::from_secs(1_800),
            ..TeamConfig::default()
        })
        .compression(CompressionConfig {
            model: compression_model,
            ..CompressionConfig::default()
        })
        .agent(
            AgentSpec::new(AGENT, model)
                .instructions(
                    "You read source files with read_file and say in one sentence what each is for.",
                )
                .tools(read_only_file_tools())
                .workspace_root(root)
                .max_turns(FILES.len() as u32 + 4)
                .max_tokens(96)
                .compaction(CompactionSettings {
                    policy: Some(policy()),
                    ..CompactionSettings::default()
                }),
        )
        .start()
        .await?;
    let mut events = team.subscribe();

    let mut compactions = 0;
    for file in FILES {
        let answer = team
            .ask(
                AGENT,
                &format!(r#"Read {file} with read_file: {{"path": "{file}"}}"#),
            )
            .await;
        let stats = team.agent::<LlmAgent>(AGENT).context_stats().await?;
        match answer {
            Ok(answer) => println!(
                "read {file}: context now {} tokens ({} %) · answer: {}",
                stats.tokens,
                stats.percent,
                one_line(&answer, 100)
            ),
            // A failed model call (a small model can run a tool call's JSON past its token
            // limit) leaves the conversation as it was: report it and go on with the next file.
            Err(e) => println!(
                "read {file}: skipped ({}); context still {} tokens ({} %)",
                one_line(&e.to_string(), 100),
                stats.tokens,
                stats.percent
            ),
        }
        compactions += print_compactions(&mut events);
    }

    let stats = team.agent::<LlmAgent>(AGENT).context_stats().await?;
    println!(
        "\n{compactions} compaction(s); context now {} of {} tokens ({} %); by kind: {}",
        stats.tokens,
        stats.window,
        stats.percent,
        stats
            .by_kind
            .iter()
            .map(|s| format!("{} {} msg / {} tok", s.name, s.messages, s.tokens))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let summary = team.checkpoint(AGENT).and_then(|c| {
        c.conversation
            .messages()
            .iter()
            .rev()
            .find(|m| m.kind == MessageKind::Summary)
            .map(|m| m.text())
    });
    match summary {
        Some(text) => println!("\nlatest summary:\n{text}"),
        None => println!("\n(no summary message: compaction freed enough without one)"),
    }
    // A compaction still working ahead ends here: shutdown cancels it (its answer would have
    // no later turn to land at) and returns once it has ended, so the run's trace holds it.
    team.shutdown().await;
    print_compactions(&mut events);
    Ok(())
}

/// The first `max` characters of `text` on one line.
fn one_line(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > max {
        format!("{}…", line.chars().take(max).collect::<String>())
    } else {
        line
    }
}
