//! Tiers 1–2 (and, for reference, 1–3 with the mechanical summarizer) on the largest corpus
//! transcript, with warm token counts. Goal: tiers 1–2 under 10 ms for ~120k tokens
//! (issue 19; it was 20 ms).
//!
//! Run: `cargo bench -p troupe-compaction --bench tiers`

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;

use criterion::{BatchSize, Criterion};
use troupe_compaction::summary::{MechanicalSummarizer, Summarizer};
use troupe_compaction::transcript::{ledger_from_transcript, parse_transcript};
use troupe_compaction::{CompactOptions, ContextPolicy, compact};
use troupe_protocol::Conversation;
use troupe_tokens::{TiktokenCounter, TokenCache};

fn main() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/pi-large-session.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!("{} not found; skipping the tiers benchmark", path.display());
        return;
    };
    let Ok(transcript) = parse_transcript(&text) else {
        println!("{} is not a transcript; skipping", path.display());
        return;
    };
    let conversation = Conversation::from_messages(transcript.messages);
    let ledger = ledger_from_transcript(conversation.messages());
    let counter = TiktokenCounter::default();
    let warm = TokenCache::new();
    let total = warm.count_messages(&counter, conversation.messages()).total;
    println!(
        "pi-large-session: {} messages, {total} tokens",
        conversation.len()
    );
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            println!("no tokio runtime ({e}); skipping");
            return;
        }
    };

    let mechanical = MechanicalSummarizer::new();
    let cases: [(&str, usize, Option<&dyn Summarizer>); 3] = [
        ("tiers_1_2_window_128k", 128_000, None),
        ("tiers_1_2_window_32k", 32_000, None),
        ("tiers_1_3_mechanical_window_32k", 32_000, Some(&mechanical)),
    ];
    // What each case does, once, so a change that should only be faster can be checked to
    // give the same result: the tier counts and a digest of the compacted messages.
    for (name, window, summarizer) in cases {
        let options = CompactOptions {
            token_cache: Some(warm.detached_copy()),
            ..CompactOptions::default()
        };
        let policy = ContextPolicy::for_window(window);
        match runtime.block_on(compact(
            &conversation,
            &ledger,
            &policy,
            &counter,
            summarizer,
            options,
        )) {
            Ok(result) => {
                let mut digest = DefaultHasher::new();
                serde_json::to_string(&result.messages)
                    .unwrap_or_default()
                    .hash(&mut digest);
                let report = &result.report;
                println!(
                    "{name}: {} → {} tokens (target {}, reached {}), {} truncated, {} masked, \
                     {} display-only removed, {} archived, {} fallbacks, messages digest {:016x}",
                    report.tokens_before,
                    report.tokens_after,
                    report.target_tokens,
                    report.reached,
                    report.tiers.truncated,
                    report.tiers.masked,
                    report.tiers.display_only_removed,
                    report.archived,
                    report.fallbacks.len(),
                    digest.finish()
                );
            }
            Err(e) => println!("{name}: compaction failed: {e}"),
        }
    }

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("pi_large_session");
    for (name, window, summarizer) in cases {
        let policy = ContextPolicy::for_window(window);
        group.bench_function(name, |b| {
            b.iter_batched(
                // A private copy per run: counts of stubs from earlier runs must not leak in.
                || warm.detached_copy(),
                |cache| {
                    let options = CompactOptions {
                        token_cache: Some(cache),
                        ..CompactOptions::default()
                    };
                    runtime.block_on(compact(
                        &conversation,
                        &ledger,
                        &policy,
                        &counter,
                        summarizer,
                        options,
                    ))
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
    criterion.final_summary();
}
