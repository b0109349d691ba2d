//! llama.cpp called directly doing the model work of one local compaction: the yardstick for
//! `troupe compact --model local`'s wall time.
//!
//! Run `troupe compact IN.json --window 8192 --model local` with
//! `RUST_LOG=troupe_models::local=debug` first: each `local generation` line gives a
//! call's `prompt_tokens` and `output_tokens`. Then
//!
//! ```text
//! TROUPE_COMPACTION_CALLS=1408:30,1483:29,4464:133 TROUPE_COMPACTION_TEXT=IN.json \
//!   cargo bench -p troupe-agents --all-features --bench local_compaction
//! ```
//!
//! decodes, for each call, that many tokens of the text into an empty KV cache and generates
//! that many tokens — what llama.cpp needs for the same calls without any reuse between them
//! (`TROUPE_BENCH_THREADS` sets the threads, default all cores, as the provider).

use std::error::Error;
use std::time::Instant;

use troupe_models::baseline::Baseline;
use troupe_models::{LocalModelConfig, fetch};

fn calls(spec: &str) -> Result<Vec<(usize, usize)>, Box<dyn Error>> {
    spec.split(',')
        .map(|call| {
            let (prompt, output) = call
                .split_once(':')
                .ok_or_else(|| format!("`{call}` is not PROMPT:OUTPUT"))?;
            Ok((prompt.trim().parse()?, output.trim().parse()?))
        })
        .collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"local_compaction".contains(&a))
    {
        return Ok(());
    }
    let Ok(spec) = std::env::var("TROUPE_COMPACTION_CALLS") else {
        println!("local_compaction: set TROUPE_COMPACTION_CALLS and TROUPE_COMPACTION_TEXT");
        return Ok(());
    };
    let calls = calls(&spec)?;
    let text = std::fs::read_to_string(std::env::var("TROUPE_COMPACTION_TEXT")?)?;
    let mut config = LocalModelConfig::default();
    if let Some(threads) = std::env::var("TROUPE_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.threads = threads;
    }
    let path = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(fetch::resolve_model_path(config.model_path.as_deref()))?;
    let mut direct = Baseline::new(&path, config.max_context, config.threads)?;
    direct.run_counts(&text, 16, 4)?; // warm-up: page the weights in
    let started = Instant::now();
    let (mut prompt_tokens, mut prompt_secs) = (0, 0.0);
    for (prompt, output) in calls {
        let run = direct.run_counts(&text, prompt, output)?;
        println!(
            "direct call: {prompt} prompt tokens in {:.0} ms ({:.0} t/s), {output} generated in {:.0} ms",
            run.prompt_time.as_secs_f64() * 1000.0,
            prompt as f64 / run.prompt_time.as_secs_f64(),
            run.generation_time.as_secs_f64() * 1000.0,
        );
        prompt_tokens += prompt;
        prompt_secs += run.prompt_time.as_secs_f64();
    }
    println!(
        "direct total: {:.0} ms wall, {prompt_tokens} tokens prefilled at {:.0} t/s, {} threads",
        started.elapsed().as_secs_f64() * 1000.0,
        prompt_tokens as f64 / prompt_secs,
        config.threads,
    );
    Ok(())
}
