//! Local model latency and throughput through troupe's streamed provider vs llama-cpp-2 called
//! directly, for the same prompt, interleaved in the same run (goal: the wrapper costs < 10 %).
//!
//! Run: `cargo bench -p troupe-agents --bench local_model` (fetches the default model on first
//! use; `TROUPE_MODEL` picks another GGUF; `TROUPE_BENCH_ROUNDS` sets the rounds, default 7;
//! `TROUPE_BENCH_THREADS` the CPU threads, default all cores).
//!
//! Per round:
//! - direct: llama-cpp-2's plain loop times prompt decoding and generation itself; its time to
//!   first token is the prompt's decoding plus one token's share of the generation;
//! - troupe: one streamed call (`chat_stream` with `max_tokens = N`), measured from outside as a
//!   user of the stream sees it: time to the first text delta (prompt throughput = prompt tokens
//!   over it, so template, tokenisation, queueing and the first sampled token count against the
//!   wrapper), then generation throughput through the stream = the tokens after the first over
//!   the time after the first delta;
//! - end to end: the whole streamed call against the whole direct run — the cleanest overhead
//!   figure.
//!
//! Both sides sample greedily with the same repetition penalty, so they generate the same tokens.
//! Each round's system prompt opens with its number: the provider keeps its KV cache between
//! calls and would otherwise decode only the last token of a prompt it saw the round before.

use std::error::Error;
use std::time::{Duration, Instant};

use futures::StreamExt;
use troupe_models::baseline::Baseline;
use troupe_models::{LocalModel, LocalModelConfig};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ModelDelta, ModelError, ResponseAssembler,
};

const SYSTEM: &str = "You are a storyteller. Write long, detailed stories.";
const USER: &str = "Write a long story about an old lighthouse keeper named Elias who lives alone \
on a granite island, keeps a logbook of every passing ship, grows potatoes behind his cottage, \
writes letters to his sister, and one winter night saves nine fishermen whose trawler drifts \
toward the reef during a storm. Describe the tower, the lamp, the sea, the seabirds, the supply \
boat, the storm, the rescue and what happens when the lighthouse is automated. Make it at least \
five paragraphs long, with dialogue, and describe the weather and the sounds of the island in \
detail. Begin with the morning of the storm and end with Elias leaving the island in spring.";
const GENERATE: u32 = 128;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[derive(Default)]
struct Samples {
    prompt_tps: Vec<f64>,
    gen_tps: Vec<f64>,
    first_token_ms: Vec<f64>,
    total_ms: Vec<f64>,
}

type Counts = Vec<(&'static str, usize, usize)>;

/// The system prompt of `round`, different from every other round's from its first word.
fn system(round: usize) -> String {
    format!("Round {round}. {SYSTEM}")
}

fn request(system: &str, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::system(system).into(),
            ChatMessage::user(USER).into(),
        ],
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        ..Default::default()
    }
}

fn direct_round(
    direct: &mut Baseline,
    prompt: &str,
    samples: &mut Samples,
    counts: &mut Counts,
) -> Result<(), Box<dyn Error>> {
    let started = Instant::now();
    let run = direct.run(prompt, GENERATE as usize)?;
    samples.total_ms.push(secs(started.elapsed()) * 1000.0);
    samples
        .prompt_tps
        .push(run.prompt_tokens as f64 / secs(run.prompt_time));
    samples
        .gen_tps
        .push(run.output_tokens as f64 / secs(run.generation_time));
    let per_token = secs(run.generation_time) / run.output_tokens.max(1) as f64;
    samples
        .first_token_ms
        .push((secs(run.prompt_time) + per_token) * 1000.0);
    counts.push(("direct", run.prompt_tokens, run.output_tokens));
    Ok(())
}

fn troupe_round(
    runtime: &tokio::runtime::Runtime,
    model: &LocalModel,
    system: &str,
    samples: &mut Samples,
    counts: &mut Counts,
) -> Result<(), Box<dyn Error>> {
    let (first, full, response) = runtime.block_on(async {
        let started = Instant::now();
        let mut stream = model.chat_stream(request(system, GENERATE)).await?;
        let mut first = None;
        let mut answer = ResponseAssembler::new();
        while let Some(delta) = stream.next().await {
            let delta = delta?;
            if first.is_none() && matches!(delta, ModelDelta::Text(_)) {
                first = Some(started.elapsed());
            }
            answer.push(&delta)?;
        }
        let full = started.elapsed();
        Ok::<_, ModelError>((first.unwrap_or(full), full, answer.finish()?))
    })?;
    samples.total_ms.push(secs(full) * 1000.0);
    samples.first_token_ms.push(secs(first) * 1000.0);
    samples
        .prompt_tps
        .push(response.usage.input_tokens as f64 / secs(first));
    let after_first = response.usage.output_tokens.saturating_sub(1) as f64;
    samples
        .gen_tps
        .push(after_first / secs(full.saturating_sub(first)));
    counts.push((
        "troupe",
        response.usage.input_tokens as usize,
        response.usage.output_tokens as usize,
    ));
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    // `cargo bench` passes `--bench`; a filter argument (e.g. from `cargo bench foo`) that does
    // not name this bench skips it.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"local_model".contains(&a))
    {
        return Ok(());
    }
    let rounds: usize = std::env::var("TROUPE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut config = LocalModelConfig::default();
    if let Some(threads) = std::env::var("TROUPE_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.threads = threads;
    }
    let model = runtime.block_on(LocalModel::load(config))?;
    let threads = model.config().threads;
    let mut direct = Baseline::new(model.path(), model.config().max_context, threads)?;
    println!(
        "local model bench: {} ({}), {threads} threads, {rounds} rounds, {GENERATE} generated tokens",
        model.info().name,
        model.path().display()
    );

    // Warm-up: page in the weights, allocate both KV caches.
    direct.run(
        &direct.chat_prompt(&[("system", SYSTEM), ("user", USER)])?,
        8,
    )?;
    runtime.block_on(model.chat(request(SYSTEM, 8)))?;

    let (mut troupe, mut raw) = (Samples::default(), Samples::default());
    let mut token_counts = Vec::new();
    for round in 0..rounds {
        let system = system(round);
        let prompt = direct.chat_prompt(&[("system", &system), ("user", USER)])?;
        // Alternate the order so neither side always runs on a warmer (or busier) machine.
        if round % 2 == 0 {
            direct_round(&mut direct, &prompt, &mut raw, &mut token_counts)?;
            troupe_round(&runtime, &model, &system, &mut troupe, &mut token_counts)?;
        } else {
            troupe_round(&runtime, &model, &system, &mut troupe, &mut token_counts)?;
            direct_round(&mut direct, &prompt, &mut raw, &mut token_counts)?;
        }
        let last = |v: &[f64]| v.last().copied().unwrap_or(f64::NAN);
        println!(
            "round {round}: first token ms {:.0} vs {:.0}, prompt t/s {:.0} vs {:.0}, gen t/s {:.1} vs {:.1}, total ms {:.0} vs {:.0} (troupe vs direct)",
            last(&troupe.first_token_ms),
            last(&raw.first_token_ms),
            last(&troupe.prompt_tps),
            last(&raw.prompt_tps),
            last(&troupe.gen_tps),
            last(&raw.gen_tps),
            last(&troupe.total_ms),
            last(&raw.total_ms),
        );
    }
    let distinct: std::collections::BTreeSet<_> = token_counts
        .iter()
        .map(|(who, p, o)| (*who, *p, *o))
        .collect();
    println!("token counts (side, prompt, generated): {distinct:?}");

    let row = |name: &str, t: f64, d: f64, higher_is_better: bool| {
        let overhead = if higher_is_better {
            (d - t) / d * 100.0
        } else {
            (t - d) / d * 100.0
        };
        println!("{name:<28} troupe {t:>9.1}   direct {d:>9.1}   wrapper cost {overhead:>+6.1} %");
    };
    println!("medians over {rounds} rounds:");
    row(
        "time to first token ms",
        median(troupe.first_token_ms),
        median(raw.first_token_ms),
        false,
    );
    row(
        "prompt tokens/s",
        median(troupe.prompt_tps),
        median(raw.prompt_tps),
        true,
    );
    row(
        "generated tokens/s (stream)",
        median(troupe.gen_tps),
        median(raw.gen_tps),
        true,
    );
    row(
        "end-to-end ms (prompt+gen)",
        median(troupe.total_ms),
        median(raw.total_ms),
        false,
    );
    Ok(())
}
