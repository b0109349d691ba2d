//! One compaction of a real transcript on the embedded model, as `troupe compact --model
//! local` runs it (a team's compression agent over the local model: its tool loop, its
//! summaries, the planner), against llama.cpp called directly decoding the same tokens, in one
//! process, round after round.
//!
//! ```text
//! TROUPE_COMPACTION_TEXT=../shared/corpus/swe-pydicom.json TROUPE_BENCH_THREADS=2 \
//!   cargo bench -p troupe-agents --bench local_compaction
//! ```
//!
//! Each round compacts the transcript (`TROUPE_COMPACTION_WINDOW`, default 8 000 tokens, target
//! 40 %) through the compression agent, then replays every model call the engine made on
//! `Baseline::run_call`: the tokens the engine reused decoded first untimed, the rest of the
//! prompt timed, as many tokens generated — so both prefill rates are at the same positions.
//! `TROUPE_BENCH_ROUNDS` sets the rounds (default 3), `TROUPE_BENCH_THREADS` the threads
//! (default all cores, as the provider). The last line of output is one JSON object.

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe_agents::compression::{
    CompactionCaller, CompactionRequest, CompressionConfig, CompressorModel, compact,
};
use troupe_agents::{shared_counter, spawn_compression_agent};
use troupe_compaction::ContextPolicy;
use troupe_compaction::transcript::{ledger_from_transcript, parse_transcript};
use troupe_models::baseline::{Baseline, CallRecord};
use troupe_models::{LocalModel, LocalModelConfig};
use troupe_protocol::{ChatModel, CompactTrigger, Conversation, TraceContext};
use troupe_runtime::{Team, TeamConfig};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One compaction through a compression agent of its own team, as the CLI's compressor runs it.
async fn compact_once(
    model: &LocalModel,
    text: &str,
    window: usize,
) -> Result<(Duration, String), Box<dyn Error>> {
    let transcript = parse_transcript(text)?;
    let conversation = Conversation::from_messages(transcript.messages.iter().cloned());
    let ledger = ledger_from_transcript(conversation.messages());
    let mut policy = ContextPolicy::for_window(window);
    policy.target = 0.4;
    let team = Team::start(TeamConfig::default()).await?;
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(Arc::new(model.clone()) as Arc<dyn ChatModel>);
    spawn_compression_agent(&team, config).await?;
    let counter = shared_counter();
    let caller = CompactionCaller {
        directory: team.directory(),
        events: team.events(),
        trace: TraceContext::new_root(),
        counter: counter.as_ref(),
    };
    let request = CompactionRequest::new(
        "transcript",
        conversation,
        ledger,
        policy,
        CompactTrigger::Manual,
    );
    let started = Instant::now();
    let compaction = compact(&caller, request).await?;
    let wall = started.elapsed();
    team.shutdown().await;
    Ok((wall, compaction.report.reason))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"local_compaction".contains(&a))
    {
        return Ok(());
    }
    let Ok(path) = std::env::var("TROUPE_COMPACTION_TEXT") else {
        println!(
            "local_compaction: set TROUPE_COMPACTION_TEXT to a transcript (../shared/corpus/…)"
        );
        return Ok(());
    };
    let text = std::fs::read_to_string(&path)?;
    let rounds = env_usize("TROUPE_BENCH_ROUNDS", 3);
    let window = env_usize("TROUPE_COMPACTION_WINDOW", 8_000);
    let threads = env_usize(
        "TROUPE_BENCH_THREADS",
        std::thread::available_parallelism().map_or(1, usize::from),
    );
    let config = LocalModelConfig {
        threads,
        ..LocalModelConfig::default()
    };
    let model = LocalModel::load(config.clone()).await?;
    let mut direct = Baseline::new(model.path(), config.max_context, threads)?;
    direct.run_counts(&text, 16, 4)?; // warm-up: the weights paged in for both
    model.take_calls();
    let (mut troupe_walls, mut direct_walls) = (Vec::new(), Vec::new());
    let (mut troupe_rates, mut direct_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut last_calls: Vec<CallRecord> = Vec::new();
    for round in 0..rounds {
        let (wall, reason) = compact_once(&model, &text, window).await?;
        let calls = model.take_calls();
        let (mut decoded, mut prompt_time) = (0usize, Duration::ZERO);
        let (mut direct_decoded, mut direct_prompt, mut direct_total) =
            (0usize, Duration::ZERO, Duration::ZERO);
        for call in &calls {
            decoded += call.prompt_tokens - call.reused_tokens;
            prompt_time += call.prompt_time;
            let run = direct.run_call(&text, call)?;
            direct_decoded += run.prompt_tokens;
            direct_prompt += run.prompt_time;
            direct_total += run.prompt_time + run.generation_time;
            println!(
                "round {round} call: prompt {} (reused {}), {} generated — troupe prefill {:.0} ms \
                 ({:.0} t/s), generation {:.0} ms; llama.cpp prefill {:.0} ms ({:.0} t/s), \
                 generation {:.0} ms",
                call.prompt_tokens,
                call.reused_tokens,
                call.output_tokens,
                call.prompt_time.as_secs_f64() * 1e3,
                (call.prompt_tokens - call.reused_tokens) as f64 / call.prompt_time.as_secs_f64(),
                call.generation_time.as_secs_f64() * 1e3,
                run.prompt_time.as_secs_f64() * 1e3,
                run.prompt_tokens as f64 / run.prompt_time.as_secs_f64(),
                run.generation_time.as_secs_f64() * 1e3,
            );
        }
        let troupe_rate = decoded as f64 / prompt_time.as_secs_f64().max(1e-9);
        let direct_rate = direct_decoded as f64 / direct_prompt.as_secs_f64().max(1e-9);
        println!(
            "round {round}: troupe compact {:.1} s ({} calls, {decoded} tokens prefilled at {troupe_rate:.0} t/s); \
             llama.cpp the same calls {:.1} s ({direct_rate:.0} t/s); {reason}",
            wall.as_secs_f64(),
            calls.len(),
            direct_total.as_secs_f64(),
        );
        troupe_walls.push(wall.as_secs_f64());
        direct_walls.push(direct_total.as_secs_f64());
        troupe_rates.push(troupe_rate);
        ratios.push(troupe_rate / direct_rate);
        direct_rates.push(direct_rate);
        last_calls = calls;
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{}",
        serde_json::json!({
            "transcript": path,
            "window": window,
            "threads": threads,
            "rounds": rounds,
            "calls": last_calls.iter().map(|c| serde_json::json!({
                "prompt_tokens": c.prompt_tokens,
                "reused_tokens": c.reused_tokens,
                "output_tokens": c.output_tokens,
            })).collect::<Vec<_>>(),
            "troupe_compact_s": median(troupe_walls),
            "llama_same_calls_s": median(direct_walls),
            "troupe_prefill_tokens_per_s": median(troupe_rates).round(),
            "llama_prefill_tokens_per_s": median(direct_rates).round(),
            "prefill_ratio": (median(ratios) * 1000.0).round() / 1000.0,
            "load_average": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        })
    );
    Ok(())
}
