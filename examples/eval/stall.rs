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
use troupe::agents::compression::{CompressionConfig, CompressorModel};
use troupe::agents::model::ScriptedModel;
use troupe::agents::session::SessionRecord;
use troupe::agents::{AgentSpec, CompactionSettings, WorkAhead, shared_counter, spawn_agent};
use troupe::compaction::invariants::validate;
use troupe::compaction::{Archive, BudgetPolicy, expand};
use troupe::runtime::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream, CompactionMode, Event,
    FinishReason, ModelError, ModelInfo, Role, Team, TeamConfig, Usage, stream_response,
};
use troupe::tools::{JsonTool, ToolContext, ToolError, ToolRegistry};
use troupe_cli::transcript_file::TranscriptFile;

/// The agent every replay runs as.
const AGENT: &str = "replayer";

/// What every summarizer call answers (the compression agent's tool loop gets it as a plain
/// answer, so its deterministic planner does the work; every segment summary is this text).
const SUMMARY: &str = "## Goal\nFinish the user's task in this repository.\n## Constraints & Preferences\n- keep the existing style\n## Progress\n### Done\n- read and edited the files named in the read/modified lists\n### In Progress\n- the current step\n### Blocked\n- none\n## Key Decisions\n- follow the transcript\n## Next Steps\n1. continue with the last request\n## Critical Context\n- see the recent messages";

/// How long a model call takes, before `--time-scale`: `fixed + prompt / prefill + output /
/// decode`, tokens estimated as characters ÷ 4.
#[derive(Debug, Clone, Copy)]
pub(super) struct Latency {
    pub(super) fixed_s: f64,
    pub(super) prefill_tok_s: f64,
    pub(super) decode_tok_s: f64,
}

/// The agent: a hosted coding model's call, about 1 s (0.4 s + 20k-token prompt ÷ 50k tok/s +
/// 40 answer tokens ÷ 80 tok/s ≈ 1.3 s).
pub(super) const AGENT_LATENCY: Latency = Latency {
    fixed_s: 0.4,
    prefill_tok_s: 50_000.0,
    decode_tok_s: 80.0,
};

/// The summarizer: a slower call that reads a long segment, about 10 s (1 s + 15k-token
/// prompt ÷ 2.5k tok/s + a 150-token summary ÷ 50 tok/s ≈ 10 s).
pub(super) const SUMMARIZER_LATENCY: Latency = Latency {
    fixed_s: 1.0,
    prefill_tok_s: 2_500.0,
    decode_tok_s: 50.0,
};

/// The latency model in words, for the JSON line.
pub(super) fn latency_description() -> String {
    let one = |l: Latency| {
        format!(
            "{} s + prompt/{} tok/s + output/{} tok/s",
            l.fixed_s, l.prefill_tok_s, l.decode_tok_s
        )
    };
    format!(
        "transcript replay (agent) + ScriptedModel summary (summarizer), each behind LatencyModel: agent {}, summarizer {}; tokens = chars/4; times x time_scale",
        one(AGENT_LATENCY),
        one(SUMMARIZER_LATENCY)
    )
}

fn chars_to_tokens(chars: usize) -> f64 {
    chars as f64 / 4.0
}

fn message_chars(m: &ChatMessage) -> usize {
    m.text().len()
        + m.calls()
            .iter()
            .map(|c| c.function.name.len() + c.function.arguments.len())
            .sum::<usize>()
}

/// A chat model decorator that sleeps as long as [`Latency`] says a call of this size takes
/// (times `scale`), and adds the time slept to `slept_ns`.
pub(super) struct LatencyModel {
    pub(super) inner: Arc<dyn ChatModel>,
    pub(super) latency: Latency,
    pub(super) scale: f64,
    pub(super) slept_ns: Arc<AtomicU64>,
}

#[async_trait]
impl ChatModel for LatencyModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    /// The answer is computed first, then held back for the call's time, then streamed.
    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let prompt: usize = request.messages.iter().map(|m| message_chars(m)).sum();
        let response = self.inner.chat(request).await?;
        let l = self.latency;
        let seconds = l.fixed_s
            + chars_to_tokens(prompt) / l.prefill_tok_s
            + chars_to_tokens(message_chars(&response.message)) / l.decode_tok_s;
        let pause = Duration::from_secs_f64(seconds * self.scale);
        tokio::time::sleep(pause).await;
        let ns = u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX);
        self.slept_ns.fetch_add(ns, Ordering::Relaxed);
        Ok(stream_response(response, 64))
    }
}

/// The agent's model against a real server: every call is also sent to `server` (the agent's
/// prompt, flattened to plain text, asking for as many tokens as the transcript's answer has),
/// and the transcript's answer comes back once the server has answered — the call takes the
/// server's real time. The server's own answer is dropped (a 135M model would not replay the
/// transcript); its failures are counted.
pub(super) struct ServedModel {
    pub(super) inner: Arc<dyn ChatModel>,
    pub(super) server: Arc<dyn ChatModel>,
    pub(super) waited_ns: Arc<AtomicU64>,
    pub(super) failures: Arc<AtomicU64>,
}

/// A conversation as plain system/user/assistant text: tool calls and results become text, so
/// any chat template takes it.
fn flattened(messages: &[Arc<ChatMessage>]) -> Vec<ChatMessage> {
    messages
        .iter()
        .map(|m| {
            let mut text = m.text();
            for call in m.calls() {
                let _ = write!(
                    text,
                    "\n[call {}] {}",
                    call.function.name, call.function.arguments
                );
            }
            match m.role {
                r if r.is_instructions() => ChatMessage::system(text),
                Role::Assistant => ChatMessage::assistant(text),
                Role::Tool => ChatMessage::user(format!("[tool result]\n{text}")),
                _ => ChatMessage::user(text),
            }
        })
        .collect()
}

#[async_trait]
impl ChatModel for ServedModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let messages = flattened(&request.messages);
        let response = self.inner.chat(request).await?;
        let answer_tokens = chars_to_tokens(message_chars(&response.message)).ceil() as u32;
        let mut served = ChatRequest::new(messages);
        served.max_tokens = Some(answer_tokens.clamp(1, 512));
        served.temperature = Some(0.0);
        let started = std::time::Instant::now();
        if self.server.chat(served).await.is_err() {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waited_ns.fetch_add(ns, Ordering::Relaxed);
        Ok(stream_response(response, 64))
    }
}

/// The summarizer against a real server: its answers as they come, timed.
pub(super) struct TimedServer {
    pub(super) server: Arc<dyn ChatModel>,
    pub(super) waited_ns: Arc<AtomicU64>,
}

#[async_trait]
impl ChatModel for TimedServer {
    fn info(&self) -> ModelInfo {
        self.server.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let started = std::time::Instant::now();
        let out = self.server.chat(request).await;
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waited_ns.fetch_add(ns, Ordering::Relaxed);
        Ok(stream_response(out?, 64))
    }
}

/// Where the models' time comes from.
#[derive(Clone)]
pub(super) enum Clock {
    /// [`LatencyModel`] with this time scale.
    Formula(f64),
    /// A real OpenAI-compatible server (a llama.cpp `llama-server`): the agent's calls are
    /// timed by it ([`ServedModel`]), the summarizer is it.
    Server(Arc<dyn ChatModel>),
}

/// The agent's model: answers each call with the next assistant message of the request being
/// replayed; once they are used up (the transcript's request ended on tool calls), "Done.".
struct TranscriptModel {
    window: usize,
    answers: Mutex<VecDeque<ChatMessage>>,
}

impl TranscriptModel {
    fn load(&self, answers: Vec<ChatMessage>) {
        if let Ok(mut queue) = self.answers.lock() {
            *queue = answers.into();
        }
    }
}

#[async_trait]
impl ChatModel for TranscriptModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: "transcript-replay".into(),
            context_window: self.window,
            supports_tools: true,
        }
    }

    async fn chat_stream(&self, _request: ChatRequest) -> Result<ChatStream, ModelError> {
        let next = self.answers.lock().ok().and_then(|mut q| q.pop_front());
        let message = match next {
            Some(m) if m.has_tool_calls() => {
                let text = m.text();
                let content = (!text.is_empty()).then_some(text);
                ChatMessage::assistant_tool_calls(content, m.calls().to_vec())
            }
            Some(m) => ChatMessage::assistant(m.text()),
            None => ChatMessage::assistant("Done."),
        };
        let finish_reason = if message.has_tool_calls() {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        let output_tokens = chars_to_tokens(message_chars(&message)) as u64;
        Ok(stream_response(
            ChatResponse {
                message,
                usage: Usage {
                    input_tokens: 0,
                    output_tokens,
                },
                finish_reason,
            },
            64,
        ))
    }
}

/// One request of the transcript: the user's text and the assistant messages that answer it.
struct Segment {
    user: String,
    answers: Vec<ChatMessage>,
}

/// The transcript as requests, the system prompt, and every recorded tool result by call id.
/// An assistant text that is followed by another assistant message ends a request: the next
/// one is asked with "Continue.".
struct Script {
    system: String,
    segments: Vec<Segment>,
    results: HashMap<String, String>,
    tools: Vec<String>,
}

fn script(input: &TranscriptFile) -> Script {
    let mut s = Script {
        system: String::new(),
        segments: Vec::new(),
        results: HashMap::new(),
        tools: Vec::new(),
    };
    let mut closed = true;
    for m in &input.messages {
        match m.role {
            r if r.is_instructions() && s.segments.is_empty() => {
                s.system.push_str(&m.text());
            }
            Role::Tool => {
                if let Some(id) = &m.tool_call_id {
                    s.results.insert(id.clone(), m.text());
                }
            }
            Role::Assistant => {
                if closed {
                    s.segments.push(Segment {
                        user: "Continue.".into(),
                        answers: Vec::new(),
                    });
                }
                for call in m.calls() {
                    if !s.tools.contains(&call.function.name) {
                        s.tools.push(call.function.name.clone());
                    }
                }
                if let Some(last) = s.segments.last_mut() {
                    last.answers.push(m.clone());
                }
                closed = !m.has_tool_calls();
            }
            _ => match s.segments.last_mut() {
                // Consecutive user messages are one request.
                Some(last) if last.answers.is_empty() => {
                    last.user.push_str("\n\n");
                    last.user.push_str(&m.text());
                }
                _ => {
                    s.segments.push(Segment {
                        user: m.text(),
                        answers: Vec::new(),
                    });
                    closed = false;
                }
            },
        }
    }
    s
}

/// A tool of the transcript: answers the result the transcript recorded for the call's id.
struct ReplayTool {
    name: String,
    parameters: Value,
    results: Arc<HashMap<String, String>>,
}

#[async_trait]
impl JsonTool for ReplayTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "Replays the transcript's recorded result of this call."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        _args: serde_json::Map<String, Value>,
    ) -> Result<String, ToolError> {
        Ok(self
            .results
            .get(&ctx.tool_call_id)
            .cloned()
            .unwrap_or_else(|| "(the transcript recorded no result)".into()))
    }
}

/// A tool per name the transcript calls.
fn replay_tools(script: &Script) -> anyhow::Result<ToolRegistry> {
    let results = Arc::new(script.results.clone());
    let mut tools = ToolRegistry::new();
    for name in &script.tools {
        tools.register_json(ReplayTool {
            name: name.clone(),
            parameters: json!({"type": "object"}),
            results: results.clone(),
        })?;
    }
    Ok(tools)
}

/// What a compaction's `CompactionFinished`/`CompactionFailed` said, before the agent took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It changed the conversation (what the session log records as a compaction).
    Changed,
    /// Nothing to do: the anti-thrash guard held it back, or it was under target.
    Unchanged,
    /// It failed.
    Failed,
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
    /// The summarizer's (scaled) model time per finished compaction, ms.
    pub(super) summarizer_ms: Vec<f64>,
    pub(super) agent_model_s: f64,
    pub(super) wall_s: f64,
    /// Agent calls the server failed (their time still counts).
    pub(super) server_failures: u64,
    /// Why compactions changed nothing (their reports' reasons, digits as `#`), counted.
    pub(super) unchanged_reasons: HashMap<String, usize>,
}

/// Replay `input` at `window` on one road (`work_ahead`).
pub(super) async fn run_road(
    input: &TranscriptFile,
    window: usize,
    work_ahead: WorkAhead,
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
    let policy = BudgetPolicy::for_window(window);
    let settings = CompactionSettings {
        policy: Some(policy.clone()),
        work_ahead,
        ..CompactionSettings::default()
    };
    let reserve = settings.output_reserve_for(None, window);
    let job_policy = CompactionSettings::reserving(&policy, reserve);
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
        // The outcome of the compaction whose `CompactionApplied` comes next: an agent has at
        // most one compaction in flight, so its events come as started, finished, applied.
        let mut outcome = None;
        // The background job since the last compaction that changed the conversation, and its
        // outcome once known; what it was when a blocking compaction started.
        let mut ahead: Option<Option<Outcome>> = None;
        let mut cause = None;
        loop {
            match events.recv().await {
                Ok(record) => match record.event {
                    Event::CompactionStarted { agent, mode, .. } if agent == AGENT => match mode {
                        CompactionMode::Background => {
                            run.started_background += 1;
                            ahead = Some(None);
                        }
                        CompactionMode::Blocking => {
                            run.started_blocking += 1;
                            cause = Some(match ahead {
                                None => Ahead::NoJob,
                                Some(None) => Ahead::Pending,
                                Some(Some(Outcome::Unchanged)) => Ahead::Unchanged,
                                Some(Some(Outcome::Failed)) => Ahead::Failed,
                                Some(Some(Outcome::Changed)) => Ahead::Dropped,
                            });
                        }
                    },
                    Event::CompactionFinished { agent, report } if agent == AGENT => {
                        let ns = summarizer_ns.swap(0, Ordering::Relaxed);
                        let changed = !report.skipped
                            && !report.no_compaction_needed
                            && (report.archived > 0 || report.tokens_after < report.tokens_before);
                        if changed {
                            run.summarizer_ms.push(ns as f64 / 1e6);
                            outcome = Some(Outcome::Changed);
                        } else {
                            outcome = Some(Outcome::Unchanged);
                            // Numbers vary; the words say why.
                            let why: String = report
                                .reason
                                .chars()
                                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                                .collect();
                            *run.unchanged_reasons.entry(why).or_default() += 1;
                        }
                    }
                    Event::CompactionFailed { agent, .. } if agent == AGENT => {
                        summarizer_ns.swap(0, Ordering::Relaxed);
                        outcome = Some(Outcome::Failed);
                    }
                    Event::CompactionApplied {
                        agent,
                        mode,
                        waited_ms,
                        applied,
                        reason,
                    } if agent == AGENT => match outcome.take() {
                        Some(outcome) => {
                            if mode == CompactionMode::Background
                                && let Some(job) = ahead.as_mut()
                            {
                                *job = Some(outcome);
                            }
                            if outcome == Outcome::Changed && applied {
                                ahead = None;
                            }
                            let cause = if mode == CompactionMode::Blocking {
                                cause.take()
                            } else {
                                None
                            };
                            run.applied.push(Applied {
                                waited_ms,
                                applied,
                                mode,
                                reason,
                                outcome,
                                cause,
                            });
                        }
                        None => run.invalid.push(format!(
                            "CompactionApplied ({mode:?}, waited {waited_ms} ms) with no compaction finished before it"
                        )),
                    },
                    _ => {}
                },
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    run.invalid.push(format!("{n} events lost (lagged)"));
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return run,
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
fn validate_log(log: &Path, policy: &BudgetPolicy) -> anyhow::Result<(usize, Vec<String>)> {
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

/// Percentile (nearest rank) of `v`, `None` when empty.
pub(super) fn percentile(v: &[f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// One transcript at one window: both roads.
pub(super) struct StallRow {
    pub(super) transcript: String,
    pub(super) split: &'static str,
    pub(super) window: usize,
    pub(super) background: RoadRun,
    pub(super) blocking: RoadRun,
}

/// The waits of the compactions that changed the conversation (applied or dropped).
fn waits(runs: &[&RoadRun]) -> Vec<f64> {
    waits_of(runs, Outcome::Changed)
}

fn waits_of(runs: &[&RoadRun], outcome: Outcome) -> Vec<f64> {
    runs.iter()
        .flat_map(|r| r.applied.iter())
        .filter(|a| a.outcome == outcome)
        .map(|a| a.waited_ms as f64)
        .collect()
}

fn ms(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |x| json!((x * 10.0).round() / 10.0))
}

/// The figures of a set of rows, as a JSON object.
pub(super) fn summary(rows: &[&StallRow], scale: f64) -> Value {
    let bg: Vec<&RoadRun> = rows.iter().map(|r| &r.background).collect();
    let bl: Vec<&RoadRun> = rows.iter().map(|r| &r.blocking).collect();
    let bg_waits = waits(&bg);
    let bl_waits = waits(&bl);
    let summ: Vec<f64> = bl.iter().flat_map(|r| r.summarizer_ms.clone()).collect();
    let all = bg.iter().chain(bl.iter());
    let invalid: Vec<String> = all.clone().flat_map(|r| r.invalid.clone()).collect();
    let logged: usize = all.clone().map(|r| r.logged).sum();
    let applied: usize = all
        .clone()
        .map(|r| {
            r.applied
                .iter()
                .filter(|a| a.applied && a.outcome == Outcome::Changed)
                .count()
        })
        .sum();
    let unchanged = waits_of(&bg, Outcome::Unchanged);
    let unchanged_blocking = waits_of(&bl, Outcome::Unchanged);
    let failed = waits_of(&bg, Outcome::Failed).len() + waits_of(&bl, Outcome::Failed).len();
    let dropped: Vec<String> = bg
        .iter()
        .flat_map(|r| r.applied.iter().filter(|a| !a.applied))
        .map(|a| a.reason.clone().unwrap_or_default())
        .collect();
    let waited_background = bg
        .iter()
        .flat_map(|r| r.applied.iter())
        .filter(|a| a.outcome == Outcome::Changed && a.waited_ms > 10)
        .count();
    let p = |v: &[f64], q| percentile(v, q);
    // The background road's compactions by how they ran: worked ahead, or blocking at the
    // trigger (the job was not started in time, or the hard limit came first).
    let by_mode = |mode: CompactionMode| {
        let w: Vec<f64> = bg
            .iter()
            .flat_map(|r| r.applied.iter())
            .filter(|a| a.outcome == Outcome::Changed && a.mode == mode)
            .map(|a| a.waited_ms as f64)
            .collect();
        json!({"n": w.len(), "p50": ms(p(&w, 50.0)), "p99": ms(p(&w, 99.0))})
    };
    let causes: HashMap<String, usize> = bg
        .iter()
        .flat_map(|r| r.applied.iter())
        .filter(|a| a.outcome == Outcome::Changed && a.mode == CompactionMode::Blocking)
        .fold(HashMap::new(), |mut m, a| {
            *m.entry(format!("{:?}", a.cause)).or_default() += 1;
            m
        });
    json!({
        "transcripts": rows.iter().map(|r| format!("{}@{}k", r.transcript, r.window / 1000)).collect::<Vec<_>>(),
        "compactions": applied,
        "compactions_background_road": waits(&bg).len(),
        "compactions_blocking_road": waits(&bl).len(),
        "applied_events": applied,
        "applied_in_background": bg.iter().flat_map(|r| r.applied.iter()).filter(|a| a.applied && a.outcome == Outcome::Changed && a.mode == CompactionMode::Background).count(),
        "invariants_ok": invalid.is_empty() && (applied == 0 || logged > 0),
        "log_records_validated": logged,
        "invalid": invalid,
        "started_background": bg.iter().map(|r| r.started_background).sum::<usize>(),
        "started_blocking_on_background_road": bg.iter().map(|r| r.started_blocking).sum::<usize>(),
        "background_answers_dropped": dropped,
        "background_waits_over_10ms": waited_background,
        "background_road_by_mode": {
            "background": by_mode(CompactionMode::Background),
            "blocking": by_mode(CompactionMode::Blocking),
            "blocking_because": causes,
        },
        "unchanged_triggers_background_road": unchanged.len(),
        "unchanged_triggers_ms_p99_background_road": ms(p(&unchanged, 99.0)),
        "unchanged_triggers_blocking_road": unchanged_blocking.len(),
        "unchanged_reasons_background_road": bg.iter().fold(HashMap::<String, usize>::new(), |mut m, r| {
            for (k, v) in &r.unchanged_reasons {
                *m.entry(k.clone()).or_default() += v;
            }
            m
        }),
        "failed": failed,
        "stall_ms_p50": ms(p(&bg_waits, 50.0)),
        "stall_ms_p99": ms(p(&bg_waits, 99.0)),
        "stall_ms_max": ms(p(&bg_waits, 100.0)),
        "blocking_stall_ms_p50": ms(p(&bl_waits, 50.0)),
        "blocking_stall_ms_p99": ms(p(&bl_waits, 99.0)),
        "summarizer_ms_per_compaction_p50": ms(p(&summ, 50.0)),
        "blocking_stall_ms_p50_unscaled": ms(p(&bl_waits, 50.0).map(|x| x / scale)),
        "summarizer_ms_per_compaction_p50_unscaled": ms(p(&summ, 50.0).map(|x| x / scale)),
        "agent_model_s_background": bg.iter().map(|r| r.agent_model_s).sum::<f64>(),
        "agent_server_failures": all.clone().map(|r| r.server_failures).sum::<u64>(),
        "wall_s_background": bg.iter().map(|r| r.wall_s).sum::<f64>(),
        "wall_s_blocking": bl.iter().map(|r| r.wall_s).sum::<f64>(),
    })
}

/// The markdown table of every row.
pub(super) fn stall_table(rows: &[StallRow]) -> String {
    let mut md = String::from(
        "| transcript | split | window | compactions bg / blocking | waited ms bg p50 / p99 / max | blocking waited ms p50 | summarizer ms / compaction p50 | wall s bg / blocking | invalid |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let bg = waits(&[&r.background]);
        let bl = waits(&[&r.blocking]);
        let f = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.0}"));
        let _ = writeln!(
            md,
            "| {} | {} | {}k | {} / {} | {} / {} / {} | {} | {} | {:.1} / {:.1} | {} |",
            r.transcript,
            r.split,
            r.window / 1000,
            r.background.logged,
            r.blocking.logged,
            f(percentile(&bg, 50.0)),
            f(percentile(&bg, 99.0)),
            f(percentile(&bg, 100.0)),
            f(percentile(&bl, 50.0)),
            f(percentile(&r.blocking.summarizer_ms, 50.0)),
            r.background.wall_s,
            r.blocking.wall_s,
            r.background.invalid.len() + r.blocking.invalid.len(),
        );
    }
    md
}

/// Where session logs go while a replay runs.
pub(super) fn log_dir() -> PathBuf {
    std::env::temp_dir().join(format!("troupe-eval-stall-{}", std::process::id()))
}
