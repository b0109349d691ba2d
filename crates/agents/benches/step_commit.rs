//! What a durable step costs (#46): the bytes and the write + fsync of each commit a model call
//! and its tool call add to a session log, against one local model call, medians of the same
//! run (goal: a step's commits cost < 5 % of a local model call).
//!
//! Run: `cargo bench -p troupe-agents --bench step_commit` (fetches the default model on first
//! use; `TROUPE_MODEL` picks another GGUF; `TROUPE_BENCH_ROUNDS` sets the rounds, default 7;
//! `TROUPE_BENCH_THREADS` the CPU threads). The log is written under `target/` (a real disk: a
//! tmpfs `/tmp` would make fsync free).
//!
//! Per round: one local model call (a short agent-like prompt, 32 generated tokens), then
//! `CYCLES` tool steps written to the log the way the agent writes them with durable steps — the
//! model's answer with its tool call (`message` + `model_answer` + `paused`), the call started
//! (`calls_started`), its 2 KB result as it completes (`call_result`) and the batch's result as a
//! message — each one commit (records, a `commit` line, an fsync), timed on its own.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use futures::StreamExt;
use troupe_models::{LocalModel, LocalModelConfig};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, Conversation, StoredMessage, ToolCall, Usage,
};
use troupe_session::{PausedCall, SessionLog, SessionRecord};

/// Tool steps timed per round.
const CYCLES: usize = 25;
/// Tokens the model call generates.
const GENERATE: u32 = 32;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One commit of `records`: its bytes and its write + fsync, in milliseconds.
fn commit(log: &mut SessionLog, records: Vec<SessionRecord>) -> Result<(u64, f64), Box<dyn Error>> {
    let before = std::fs::metadata(log.path())?.len();
    for record in records {
        log.append(record);
    }
    let started = Instant::now();
    log.flush()?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok((std::fs::metadata(log.path())?.len() - before, ms))
}

/// The kinds of commit one tool step makes, in order.
const KINDS: [&str; 4] = [
    "model answer (message, model_answer, paused)",
    "calls_started",
    "call_result (2 KB result)",
    "tool result message (2 KB)",
];

fn tool_step(
    log: &mut SessionLog,
    conversation: &mut Conversation,
    n: usize,
    result: &str,
) -> Result<[(u64, f64); 4], Box<dyn Error>> {
    let id = format!("call_{n}");
    let arguments = format!(r#"{{"path": "src/module_{n}.rs"}}"#);
    let call = ToolCall::new(&id, "read_file", &arguments);
    let answer = conversation.push(ChatMessage::assistant_tool_calls(None, vec![call]));
    let answer = StoredMessage::from(conversation.get(answer).ok_or("no answer")?);
    let open = PausedCall {
        call_id: id.clone(),
        tool: "read_file".to_string(),
        arguments,
        ask: false,
        approval: None,
        started: false,
        result: None,
    };
    let usage = Usage {
        input_tokens: 4_000 + n as u64,
        output_tokens: 40,
        ..Usage::default()
    };
    let a = commit(
        log,
        vec![
            SessionRecord::Message(answer),
            SessionRecord::ModelAnswer { usage },
            SessionRecord::Paused { calls: vec![open] },
        ],
    )?;
    let b = commit(
        log,
        vec![SessionRecord::CallsStarted {
            call_ids: vec![id.clone()],
        }],
    )?;
    let c = commit(
        log,
        vec![SessionRecord::CallResult {
            call_id: id.clone(),
            content: result.to_string(),
        }],
    )?;
    let message = conversation.push(ChatMessage::tool_result(id, result));
    let message = StoredMessage::from(conversation.get(message).ok_or("no result")?);
    let d = commit(log, vec![SessionRecord::Message(message)])?;
    Ok([a, b, c, d])
}

fn model_request(round: usize) -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::system(format!(
                "Round {round}. You are a careful engineer. Answer in one short sentence."
            ))
            .into(),
            ChatMessage::user(
                "Which file should be read first to understand a Rust crate, and why?",
            )
            .into(),
        ],
        max_tokens: Some(GENERATE),
        temperature: Some(0.0),
        ..ChatRequest::default()
    }
}

async fn model_call(model: &LocalModel, round: usize) -> Result<f64, Box<dyn Error>> {
    let started = Instant::now();
    let mut stream = model.chat_stream(model_request(round)).await?;
    while let Some(delta) = stream.next().await {
        delta?;
    }
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

fn main() -> Result<(), Box<dyn Error>> {
    let rounds: usize = std::env::var("TROUPE_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    let runtime = tokio::runtime::Runtime::new()?;
    let mut config = LocalModelConfig::default();
    if let Some(threads) = std::env::var("TROUPE_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        config.threads = threads;
    }
    let model = runtime.block_on(LocalModel::load(config))?;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/step-commit-bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("bench.jsonl");
    let _ = std::fs::remove_file(&path);
    let (mut log, _) = SessionLog::open(&path)?;
    let mut conversation = Conversation::new();
    conversation.push(ChatMessage::user("read the crate and explain it"));
    let result: String = (0..40)
        .map(|i| format!("{i:>4} | fn item_{i}(input: &str) -> Result<String, Error> {{ }}\n"))
        .collect::<String>()
        .chars()
        .take(2048)
        .collect();
    println!(
        "step commit bench: {} ({} threads), {rounds} rounds of one model call ({GENERATE} tokens) \
         and {CYCLES} tool steps; log {}",
        model.path().display(),
        model.config().threads,
        path.display()
    );
    // The first call loads the weights into the caches: not a sample.
    runtime.block_on(model_call(&model, usize::MAX))?;
    let mut calls = Vec::new();
    let mut ms: [Vec<f64>; 4] = Default::default();
    let mut bytes: [Vec<f64>; 4] = Default::default();
    let mut per_step = Vec::new();
    let mut n = 0;
    for round in 0..rounds {
        let call = runtime.block_on(model_call(&model, round))?;
        calls.push(call);
        let mut round_ms = Vec::new();
        for _ in 0..CYCLES {
            n += 1;
            let commits = tool_step(&mut log, &mut conversation, n, &result)?;
            for (k, (b, t)) in commits.iter().enumerate() {
                bytes[k].push(*b as f64);
                ms[k].push(*t);
            }
            let step: f64 = commits.iter().map(|(_, t)| t).sum();
            per_step.push(step);
            round_ms.push(step);
        }
        println!(
            "round {round}: model call {call:.1} ms; tool step's commits median {:.3} ms",
            median(round_ms)
        );
    }
    let call = median(calls);
    println!("\n| commit | bytes (median) | write + fsync, ms (median) |");
    println!("| --- | ---: | ---: |");
    for k in 0..4 {
        println!(
            "| {} | {:.0} | {:.3} |",
            KINDS[k],
            median(bytes[k].clone()),
            median(ms[k].clone())
        );
    }
    let step = median(per_step);
    println!(
        "\nmodel call + tool call, all four commits: {step:.3} ms (median of {n}); one local model \
         call: {call:.1} ms (median of {rounds}); ratio {:.2} %",
        step / call * 100.0
    );
    Ok(())
}
