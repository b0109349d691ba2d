//! `--mode stall`: how long live agents' turns wait on compaction, on the background road
//! (the compression agent works ahead) and on the blocking road (`WorkAhead::Off`), same run.
//!
//! Each transcript is lived by a real [`LlmAgent`] in a [`Team`] with a compression agent: every
//! user message of the transcript is a request; the agent's model answers each call with the
//! transcript's next assistant message (its tool calls keep their ids) and every tool it calls
//! answers with the result the transcript recorded for that id. Both models take realistic
//! time ([`LatencyModel`]); what is measured is real wall time on the agent's side:
//! `Event::CompactionApplied::waited_ms`, how long the agent's request was held up by each
//! compaction. Every compaction is validated independently afterwards, from the agent's session
//! log: the conversation as the log had it before each compaction record, the record's
//! messages and the archive entries so far go through `troupe_compaction::invariants::validate`.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use troupe::agents::CompactionAskError;
use troupe::agents::compression::{CompressionConfig, CompressorModel};
use troupe::agents::{
    AgentSpec, AtLimit, CompactionSettings, WorkAhead, shared_counter, spawn_agent,
};
use troupe::compaction::invariants::validate;
use troupe::compaction::{Archive, ContextPolicy, expand};
use troupe::models::ScriptedModel;
use troupe::protocol::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream, CompactionMode, Event,
    FinishReason, ModelError, ModelInfo, Role, Usage, stream_response,
};
use troupe::runtime::{Team, TeamConfig};
use troupe::session::SessionRecord;
use troupe::tools::{JsonTool, ToolContext, ToolError, ToolRegistry};
use troupe_cli::transcript_file::TranscriptFile;

mod attribution;
mod models;
mod report;
mod script;

use attribution::Attribution;
pub(crate) use models::*;
pub(crate) use report::*;
use script::*;

/// The agent every replay runs as.
const AGENT: &str = "replayer";

/// What every summarizer call answers (the compression agent's tool loop gets it as a plain
/// answer, so its deterministic planner does the work; every segment summary is this text).
const SUMMARY: &str = "## Goal\nFinish the user's task in this repository.\n## Constraints & Preferences\n- keep the existing style\n## Progress\n### Done\n- read and edited the files named in the read/modified lists\n### In Progress\n- the current step\n### Blocked\n- none\n## Key Decisions\n- follow the transcript\n## Next Steps\n1. continue with the last request\n## Critical Context\n- see the recent messages";

/// What a compaction's `CompactionFinished`/`CompactionFailed` said, before the agent took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It changed the conversation (what the session log records as a compaction).
    Changed,
    /// Nothing to do: the anti-thrash guard held it back, or it was under target.
    Unchanged,
    /// It failed.
    Failed,
    /// Its asker cancelled it: a job in flight that another compaction made stale (an agent
    /// that made room at its limit), or one still running at shutdown.
    Cancelled,
}

/// One compaction as the agent saw it (`CompactionApplied`).
#[derive(Debug, Clone)]
pub(super) struct Applied {
    pub(super) waited_ms: u64,
    pub(super) applied: bool,
    pub(super) mode: CompactionMode,
    pub(super) reason: Option<String>,
    pub(super) outcome: Outcome,
    /// For a blocking compaction: what had been worked ahead since the last compaction.
    pub(super) cause: Option<Ahead>,
}

/// What the background road had done when an agent compacted blocking after all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ahead {
    /// No background job since the last compaction: the conversation passed from under the
    /// work-ahead threshold to the trigger in one step (or work-ahead is off).
    NoJob,
    /// A background job was started and had not come back.
    Pending,
    /// The background job changed nothing (the anti-thrash guard held it back).
    Unchanged,
    /// The background job failed.
    Failed,
    /// The background job's answer was dropped.
    Dropped,
}

/// One replay of one transcript on one road.
#[derive(Debug, Default)]
pub(super) struct RoadRun {
    pub(super) applied: Vec<Applied>,
    pub(super) started_background: usize,
    pub(super) started_blocking: usize,
    /// Compaction records in the session log, each validated.
    pub(super) logged: usize,
    pub(super) invalid: Vec<String>,
    /// Compaction events the eval could not attribute to a compaction (`attribution.rs`).
    pub(super) unattributed: Vec<String>,
    /// The summarizer's (scaled) model time per finished compaction, ms.
    pub(super) summarizer_ms: Vec<f64>,
    pub(super) agent_model_s: f64,
    pub(super) wall_s: f64,
    /// Agent calls the server failed (their time still counts).
    pub(super) server_failures: u64,
    /// Why compactions changed nothing (their reports' reasons, digits as `#`), counted.
    pub(super) unchanged_reasons: HashMap<String, usize>,
}

/// Replay `input` at `window` on one road (when it works ahead, and what it does at the limit).
pub(super) async fn run_road(
    input: &TranscriptFile,
    window: usize,
    (work_ahead, at_limit): (WorkAhead, AtLimit),
    clock: &Clock,
    log_dir: &Path,
) -> anyhow::Result<RoadRun> {
    let script = script(input);
    let started = std::time::Instant::now();
    let team = Team::start(TeamConfig {
        ask_timeout: Duration::from_secs(3600),
        event_capacity: 1 << 16,
        ..TeamConfig::default()
    })
    .await?;
    let mut events = team.subscribe();
    let summarizer_ns = Arc::new(AtomicU64::new(0));
    let summarizer: Arc<dyn ChatModel> = match clock {
        Clock::Formula(scale) => Arc::new(LatencyModel {
            inner: Arc::new(ScriptedModel::new("summarizer", []).with_fallback(SUMMARY)),
            latency: SUMMARIZER_LATENCY,
            scale: *scale,
            slept_ns: summarizer_ns.clone(),
        }),
        Clock::Server(server) => Arc::new(TimedServer {
            server: server.clone(),
            waited_ns: summarizer_ns.clone(),
        }),
    };
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(summarizer);
    troupe::agents::spawn_compression_agent(&team, config).await?;

    let transcript_model = Arc::new(TranscriptModel {
        window,
        answers: Mutex::new(VecDeque::new()),
    });
    let agent_ns = Arc::new(AtomicU64::new(0));
    let server_failures = Arc::new(AtomicU64::new(0));
    let model: Arc<dyn ChatModel> = match clock {
        Clock::Formula(scale) => Arc::new(LatencyModel {
            inner: transcript_model.clone(),
            latency: AGENT_LATENCY,
            scale: *scale,
            slept_ns: agent_ns.clone(),
        }),
        Clock::Server(server) => Arc::new(ServedModel {
            inner: transcript_model.clone(),
            server: server.clone(),
            waited_ns: agent_ns.clone(),
            failures: server_failures.clone(),
        }),
    };
    let policy = ContextPolicy::for_window(window);
    let settings = CompactionSettings {
        policy: Some(policy.clone()),
        work_ahead,
        at_limit,
        ..CompactionSettings::default()
    };
    let job_policy = settings.policy_for(window, None);
    let road = if work_ahead == WorkAhead::Off {
        "blocking"
    } else {
        "background"
    };
    let log = log_dir.join(format!("{road}.jsonl"));
    let _ = std::fs::remove_file(&log);
    let spec = AgentSpec::new(AGENT, model)
        .instructions(script.system.clone())
        .tools(replay_tools(&script)?)
        .max_turns(100_000)
        .compaction(settings)
        .session(&log);
    spawn_agent(&team, spec).await?;

    // Events are collected as they come: a lagging receiver would lose them.
    let collector = tokio::spawn(async move {
        let mut run = RoadRun::default();
        // Each event's compaction, by mode (attribution.rs).
        let mut attribution = Attribution::default();
        loop {
            match events.recv().await {
                Ok(record) => match record.event {
                    Event::CompactionStarted { agent, mode, .. } if agent == AGENT => {
                        match mode {
                            CompactionMode::Background => run.started_background += 1,
                            CompactionMode::Blocking => run.started_blocking += 1,
                        }
                        if let Err(e) = attribution.started(record.seq, mode) {
                            run.unattributed.push(e);
                        }
                    }
                    Event::CompactionFinished {
                        agent,
                        report,
                        mode,
                    } if agent == AGENT => {
                        let ns = summarizer_ns.swap(0, Ordering::Relaxed);
                        let changed = !report.skipped
                            && !report.no_compaction_needed
                            && (report.archived > 0 || report.tokens_after < report.tokens_before);
                        let outcome = if changed {
                            run.summarizer_ms.push(ns as f64 / 1e6);
                            Outcome::Changed
                        } else {
                            // Numbers vary; the words say why.
                            let why: String = report
                                .reason
                                .chars()
                                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                                .collect();
                            *run.unchanged_reasons.entry(why).or_default() += 1;
                            Outcome::Unchanged
                        };
                        if let Err(e) = attribution.ended(record.seq, mode, outcome) {
                            run.unattributed.push(e);
                        }
                    }
                    Event::CompactionFailed {
                        agent,
                        reason,
                        mode,
                    } if agent == AGENT => {
                        summarizer_ns.swap(0, Ordering::Relaxed);
                        let outcome = if reason == CompactionAskError::Cancelled.to_string() {
                            Outcome::Cancelled
                        } else {
                            Outcome::Failed
                        };
                        if let Err(e) = attribution.ended(record.seq, mode, outcome) {
                            run.unattributed.push(e);
                        }
                    }
                    Event::CompactionApplied {
                        agent,
                        mode,
                        waited_ms,
                        applied,
                        reason,
                    } if agent == AGENT => {
                        match attribution.applied(record.seq, mode, applied, waited_ms) {
                            Ok(closed) => run.applied.push(Applied {
                                waited_ms,
                                applied,
                                mode,
                                reason,
                                outcome: closed.outcome,
                                cause: closed.cause,
                            }),
                            Err(e) => run.unattributed.push(e),
                        }
                    }
                    _ => {}
                },
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    run.invalid.push(format!("{n} events lost (lagged)"));
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    run.unattributed.extend(attribution.finish());
                    return run;
                }
            }
        }
    });

    let mut failure = None;
    for segment in script.segments {
        transcript_model.load(segment.answers);
        if let Err(e) = team.ask(AGENT, segment.user).await {
            failure = Some(anyhow::anyhow!("the agent failed a request: {e}"));
            break;
        }
    }
    team.shutdown().await;
    let mut run = collector.await?;
    if let Some(e) = failure {
        return Err(e);
    }
    run.wall_s = started.elapsed().as_secs_f64();
    run.agent_model_s = agent_ns.load(Ordering::Relaxed) as f64 / 1e9;
    run.server_failures = server_failures.load(Ordering::Relaxed);
    let (logged, invalid) = validate_log(&log, &job_policy)?;
    run.logged = logged;
    run.invalid.extend(invalid);
    if std::env::var_os("TROUPE_EVAL_KEEP_LOGS").is_none() {
        let _ = std::fs::remove_file(&log);
    }
    Ok(run)
}

/// Walk the session log and check every compaction record independently of the agent: the
/// conversation before it is its messages with its own archive entries expanded (the live
/// conversation then, earlier summaries included); that must continue the conversation the log
/// had so far (the previous compaction's messages and the messages logged since) — nothing
/// lost, nothing changed — and the compaction from it must pass `validate` (tool pairing,
/// protected messages, system prompt, parallel calls, tokens, exact expansion).
fn validate_log(log: &Path, policy: &ContextPolicy) -> anyhow::Result<(usize, Vec<String>)> {
    let counter = shared_counter();
    let text = std::fs::read_to_string(log)?;
    let mut live: Vec<ChatMessage> = Vec::new();
    let mut logged = 0;
    let mut invalid = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let record: SessionRecord = match serde_json::from_str(line) {
            Ok(r) => r,
            Err(e) => {
                invalid.push(format!("log line {}: {e}", n + 1));
                continue;
            }
        };
        match record {
            SessionRecord::Message(m) => live.push(m.into()),
            SessionRecord::Clear => live.clear(),
            SessionRecord::Compaction(record) => {
                logged += 1;
                let at = format!("compaction {logged} (log line {})", n + 1);
                let after: Vec<ChatMessage> =
                    record.messages.iter().cloned().map(Into::into).collect();
                if record.archive_entries.is_empty() && !record.archived.is_empty() {
                    invalid.push(format!("{at}: archived messages but no archive entries"));
                }
                let own = Archive::from(record.archive_entries.clone());
                match expand(&after, &own) {
                    Err(e) => invalid.push(format!("{at}: cannot be expanded: {e}")),
                    Ok(before) => {
                        if !before.starts_with(&live) {
                            let i = before.iter().zip(&live).position(|(b, l)| b != l);
                            invalid.push(format!(
                                "{at}: the conversation it compacted does not continue the logged one ({} vs {} messages, first difference at {i:?})",
                                before.len(),
                                live.len()
                            ));
                        }
                        if let Err(v) = validate(&before, &after, &own, policy, counter.as_ref()) {
                            invalid.push(format!("{at}: {v}"));
                        }
                    }
                }
                live = after;
            }
            _ => {}
        }
    }
    Ok((logged, invalid))
}

/// Where session logs go while a replay runs.
pub(super) fn log_dir() -> PathBuf {
    std::env::temp_dir().join(format!("troupe-eval-stall-{}", std::process::id()))
}
