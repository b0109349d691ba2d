//! The embedded model serving a team (#32): four agents with growing conversations taking
//! turns, then the four generating at once, against llama.cpp decoding four sequences in one
//! batch itself, in the same run.
//!
//! Run: `cargo bench -p troupe-agents --bench local_team` (fetches the default model on first
//! use; `TROUPE_MODEL` picks another GGUF; `TROUPE_BENCH_ROUNDS` sets the rounds, default 3;
//! `TROUPE_BENCH_THREADS` the CPU threads, default all cores).
//!
//! - Turns: each round, each agent in turn gets a new user message and answers (greedy, up to
//!   48 tokens). Per turn the engine's count of prompt tokens decoded is read before and after;
//!   the tokens new to that agent's conversation are its prompt less its previous prompt (the
//!   answer it gave and the new message). `prefilled_per_new_token` = decoded ÷ new over all
//!   turns: 1 or a little under when each agent's conversation stays cached (its own answer was
//!   decoded as it was generated), its whole prompt ÷ new when agents evict each other.
//! - Together: each round the four agents are asked at once for a long answer (up to 64
//!   tokens), streamed; `team_tokens_per_s` = the tokens generated (each answer's usage) after
//!   the last of the four first deltas ÷ the time from that delta to the last answer's end —
//!   the stretch `llama_batched_tokens_per_s` measures too, in the same unit. (Until #56 the
//!   figure counted text deltas from the last first delta to the first end: a delta is not a
//!   token — a whitespace token is held back until text follows it, so a newline and the word
//!   after it are one delta — and the stretch was not llama.cpp's; it is still printed as
//!   `team_deltas_per_s`.) `single_tokens_per_s`: one agent asked alone, the same way.
//! - llama.cpp: `Baseline::run_batched` decodes the four agents' conversations into four
//!   sequences — each rendered through the chat template message by message, as the provider
//!   renders it, so both sides attend over the same tokens (until #56 the baseline flattened
//!   each conversation into one user message: 6 % fewer tokens; `round_prompt_tokens` prints
//!   both counts) — and generates, one token per sequence per batch, as many tokens as each
//!   agent did: `llama_batched_tokens_per_s` = tokens after each first one ÷ the batched time,
//!   from the first tokens sampled to the last sequence's end.
//!
//! Each round runs the team and llama.cpp back to back, so a round's ratio compares them under
//! the same load; `team_vs_llama_batched` is the median of the rounds' ratios.
//!
//! Figures are medians over rounds; the last line of output is one JSON object.

use std::error::Error;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::join_all;
use troupe_models::baseline::Baseline;
use troupe_models::{LocalModel, LocalModelConfig};
use troupe_protocol::{ChatMessage, ChatModel, ChatRequest, ModelDelta, ToolChoice};

const AGENTS: [&str; 4] = ["planner", "coder", "tester", "writer"];
const TURN_TOKENS: u32 = 48;
const TOGETHER_TOKENS: u32 = 64;

const BRIEF: &str = "The team maintains a small harbour-management program: it tracks the \
berths of a fishing harbour, the boats that use them, the tides, the fuel dock and the fees. \
Boats arrive and leave at all hours; each berth has a length, a depth at low tide and a daily \
fee. The harbour master wants a weekly report of occupancy, unpaid fees and boats that stayed \
longer than booked, and a warning when a boat is booked into a berth too shallow for it at low \
tide. Keep answers short and concrete, name files and functions, and say what you would check.";

const QUESTIONS: [&str; 6] = [
    "What should the berth record hold, and why?",
    "How would you warn about a berth too shallow at low tide?",
    "Which tests would catch a wrong weekly occupancy figure?",
    "How should unpaid fees be shown in the weekly report?",
    "What goes wrong when a boat leaves without checking out?",
    "How would you store the tide table for a year?",
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

fn request(agent: &str, messages: &[ChatMessage], max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages: messages.iter().cloned().map(Into::into).collect(),
        tool_choice: ToolChoice::None,
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        agent: Some(agent.to_string()),
        ..ChatRequest::default()
    }
}

/// One streamed answer: its text, output tokens, when each text delta came and when it ended.
struct Streamed {
    text: String,
    prompt_tokens: usize,
    output_tokens: usize,
    deltas: Vec<Instant>,
    end: Instant,
}

impl Streamed {
    fn first(&self) -> Instant {
        self.deltas.first().copied().unwrap_or(self.end)
    }
}

async fn stream(model: &LocalModel, request: ChatRequest) -> Result<Streamed, Box<dyn Error>> {
    let mut stream = model.chat_stream(request).await?;
    let mut deltas = Vec::new();
    let mut text = String::new();
    let (mut prompt_tokens, mut output_tokens) = (0, 0);
    while let Some(delta) = stream.next().await {
        match delta? {
            ModelDelta::Text(t) => {
                deltas.push(Instant::now());
                text.push_str(&t);
            }
            ModelDelta::Usage(usage) => {
                prompt_tokens = usage.input_tokens as usize;
                output_tokens = usage.output_tokens as usize;
            }
            _ => {}
        }
    }
    let end = Instant::now();
    Ok(Streamed {
        text,
        prompt_tokens,
        output_tokens,
        deltas,
        end,
    })
}

/// Tokens generated over the time the answers were generating together and after: from the
/// last first delta (every answer has started; a job queued while a pass runs joins the next
/// one, so the first tokens need not come together) to the last end. The tokens are the
/// answers' usage less what each had produced by then (its deltas up to that instant), so a
/// whitespace token merged into the next delta still counts — llama.cpp's unit and stretch.
fn generation_rate(answers: &[Streamed]) -> f64 {
    let (Some(start), Some(end)) = (
        answers.iter().map(Streamed::first).max(),
        answers.iter().map(|a| a.end).max(),
    ) else {
        return f64::NAN;
    };
    let tokens: usize = answers
        .iter()
        .map(|a| {
            let before = a.deltas.iter().filter(|&&t| t <= start).count();
            a.output_tokens.saturating_sub(before.max(1))
        })
        .sum();
    tokens as f64 / end.duration_since(start).as_secs_f64().max(1e-9)
}

/// The figure before #56: text deltas from the last first delta to the first end.
fn delta_rate(answers: &[Streamed]) -> f64 {
    let (Some(start), Some(end)) = (
        answers.iter().map(Streamed::first).max(),
        answers.iter().map(|a| a.end).min(),
    ) else {
        return f64::NAN;
    };
    let tokens = answers
        .iter()
        .flat_map(|a| &a.deltas)
        .filter(|&&t| t > start && t <= end)
        .count();
    tokens as f64 / end.duration_since(start).as_secs_f64().max(1e-9)
}

/// A conversation through the model's chat template, message by message, as the provider
/// renders it: the baseline decodes as many tokens at the same depth as the team does.
fn templated(baseline: &Baseline, conversation: &[ChatMessage]) -> Result<String, Box<dyn Error>> {
    let texts: Vec<(&str, String)> = conversation
        .iter()
        .map(|m| (m.role.as_str(), m.text()))
        .collect();
    let messages: Vec<(&str, &str)> = texts.iter().map(|(r, t)| (*r, t.as_str())).collect();
    Ok(baseline.chat_prompt(&messages)?)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let rounds = env_usize("TROUPE_BENCH_ROUNDS", 3);
    let threads = env_usize(
        "TROUPE_BENCH_THREADS",
        std::thread::available_parallelism().map_or(1, usize::from),
    );
    let config = LocalModelConfig {
        threads,
        ..LocalModelConfig::default()
    };
    let model = LocalModel::load(config.clone()).await?;
    let path = model.path().to_path_buf();
    let mut conversations: Vec<Vec<ChatMessage>> = AGENTS
        .iter()
        .map(|name| {
            vec![ChatMessage::system(format!(
                "You are the team's {name}. {BRIEF}"
            ))]
        })
        .collect();

    // Turns: each agent in turn, its conversation growing.
    let (mut decoded, mut new) = (0u64, 0u64);
    let mut previous = [0u64; AGENTS.len()];
    for round in 0..rounds {
        for (i, agent) in AGENTS.iter().enumerate() {
            let question = QUESTIONS[(round + i) % QUESTIONS.len()];
            conversations[i].push(ChatMessage::user(question));
            let before = model.prompt_tokens_decoded();
            let answer = model
                .chat(request(agent, &conversations[i], TURN_TOKENS))
                .await?;
            let turn_decoded = model.prompt_tokens_decoded() - before;
            let prompt = answer.usage.input_tokens;
            let turn_new = prompt - previous[i];
            println!(
                "turn {round} {agent:8} prompt {prompt:5} new {turn_new:4} decoded {turn_decoded:5}"
            );
            decoded += turn_decoded;
            new += turn_new;
            previous[i] = prompt;
            conversations[i].push(answer.message);
        }
    }
    let prefilled_per_new_token = decoded as f64 / new.max(1) as f64;

    // Together: the four at once, one alone, llama.cpp batched.
    let mut baseline = Baseline::new(&path, config.max_context, threads)?;
    let (mut team, mut single, mut llama) = (Vec::new(), Vec::new(), Vec::new());
    let (mut deltas, mut ratios) = (Vec::new(), Vec::new());
    // Per round: the prompt tokens of the team's four requests and of llama.cpp's four.
    let mut prompt_tokens: Vec<[usize; 2]> = Vec::new();
    for round in 0..rounds {
        let ask = format!(
            "Round {round}: describe, step by step and in detail, how you would build your part of \
             the weekly report."
        );
        let requests: Vec<ChatRequest> = AGENTS
            .iter()
            .enumerate()
            .map(|(i, agent)| {
                let mut messages = conversations[i].clone();
                messages.push(ChatMessage::user(ask.clone()));
                request(agent, &messages, TOGETHER_TOKENS)
            })
            .collect();
        let answers: Vec<Streamed> = join_all(requests.into_iter().map(|r| stream(&model, r)))
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        let rate = generation_rate(&answers);
        team.push(rate);
        deltas.push(delta_rate(&answers));
        let outputs: Vec<usize> = answers.iter().map(|a| a.output_tokens).collect();
        let team_prompt_tokens: usize = answers.iter().map(|a| a.prompt_tokens).sum();

        let mut alone = conversations[0].clone();
        alone.push(ChatMessage::user(format!("{ask} Once more, briefly.")));
        let one = stream(&model, request(AGENTS[0], &alone, TOGETHER_TOKENS)).await?;
        let one_rate = generation_rate(std::slice::from_ref(&one));
        single.push(one_rate);

        let prompts: Vec<String> = conversations
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.push(ChatMessage::user(ask.clone()));
                templated(&baseline, &c)
            })
            .collect::<Result<_, _>>()?;
        let run = baseline.run_batched(&prompts, &outputs)?;
        let batched_tokens = run.output_tokens.saturating_sub(outputs.len());
        let llama_rate = batched_tokens as f64 / run.generation_time.as_secs_f64().max(1e-9);
        llama.push(llama_rate);
        ratios.push(rate / llama_rate);
        prompt_tokens.push([team_prompt_tokens, run.prompt_tokens]);
        println!(
            "together {round}: team {rate:6.1} tok/s ({outputs:?} tokens), alone {one_rate:6.1} \
             tok/s ({} tokens), llama.cpp batched {llama_rate:6.1} tok/s (prompts {} tokens, the team's {team_prompt_tokens}, {:?})",
            one.output_tokens,
            run.prompt_tokens,
            Duration::from_secs_f64(run.generation_time.as_secs_f64()),
        );
        for (i, answer) in answers.into_iter().enumerate() {
            conversations[i].push(ChatMessage::user(ask.clone()));
            conversations[i].push(ChatMessage::assistant(answer.text));
        }
    }
    // The cells an idle agent holds: its conversation as its last turn left it.
    let held_tokens = previous.iter().sum::<u64>() as usize / AGENTS.len();
    let team_tokens_per_s = median(team);
    let llama_batched_tokens_per_s = median(llama);
    let kv_bytes_per_cell = baseline.kv_bytes_per_cell();
    println!(
        "{}",
        serde_json::json!({
            "rounds": rounds,
            "agents": AGENTS.len(),
            "threads": threads,
            "prefilled_per_new_token": (prefilled_per_new_token * 1000.0).round() / 1000.0,
            "prompt_tokens_decoded": decoded,
            "tokens_new_to_conversations": new,
            "team_tokens_per_s": (team_tokens_per_s * 10.0).round() / 10.0,
            "single_tokens_per_s": (median(single) * 10.0).round() / 10.0,
            "llama_batched_tokens_per_s": (llama_batched_tokens_per_s * 10.0).round() / 10.0,
            "team_vs_llama_batched": (median(ratios.clone()) * 1000.0).round() / 1000.0,
            "round_ratios": ratios.iter().map(|r| (r * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
            "round_prompt_tokens": prompt_tokens,
            "team_deltas_per_s": (median(deltas) * 10.0).round() / 10.0,
            "load_average": std::fs::read_to_string("/proc/loadavg").unwrap_or_default()
                .split_whitespace().take(3).collect::<Vec<_>>().join(" "),
            "kv_bytes_per_cell": kv_bytes_per_cell,
            "idle_agent_cells": held_tokens,
            "idle_agent_kv_bytes": held_tokens * kv_bytes_per_cell,
        })
    );
    Ok(())
}
