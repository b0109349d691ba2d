//! Token counting throughput on the shared corpus: raw `tiktoken-rs`, troupe's counter, and the
//! per-message cache (warm — by content for owned messages, by identity for a conversation's
//! shared ones — and a growing conversation recounting one new message).
//!
//! Run: `cargo bench -p troupe-compaction --bench token_counting`

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, Throughput};
use troupe_compaction::transcript::parse_transcript;
use troupe_protocol::{ChatMessage, Conversation};
use troupe_tokens::{TiktokenCounter, TokenCache, TokenCounter};

/// The corpus transcripts as conversations would hold them (ids assigned), owned.
fn corpus() -> Option<Vec<Vec<ChatMessage>>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!(
            "corpus not found at {}; skipping the token counting benchmark",
            dir.display()
        );
        return None;
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let conversations = paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|text| parse_transcript(&text).ok())
        .map(|t| Conversation::from_messages(t.messages).to_messages())
        .collect();
    Some(conversations)
}

/// Every string the counter tokenizes, so raw tiktoken does the same work.
fn texts(messages: &[ChatMessage]) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        out.push(m.text());
        for call in m.calls() {
            out.push(call.function.name.clone());
            out.push(call.function.arguments.clone());
        }
    }
    out
}

fn main() {
    let Some(conversations) = corpus() else {
        return;
    };
    let messages: Vec<ChatMessage> = conversations
        .iter()
        .flat_map(|c| c.iter().cloned())
        .collect();
    let texts: Vec<String> = conversations.iter().flat_map(|c| texts(c)).collect();
    let bytes: u64 = texts.iter().map(|t| t.len() as u64).sum();
    let counter = TiktokenCounter::default();
    let bpe = tiktoken_rs::o200k_base_singleton();

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("count_corpus");
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("tiktoken_encode_ordinary_raw", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| bpe.encode_ordinary(t).len())
                .sum::<usize>()
        })
    });
    group.bench_function("tiktoken_counter_uncached", |b| {
        b.iter(|| {
            conversations
                .iter()
                .map(|c| counter.count_messages(c))
                .sum::<usize>()
        })
    });
    // One cache per conversation, as agents keep them (ids are per conversation).
    let caches: Vec<TokenCache> = conversations
        .iter()
        .map(|c| {
            let cache = TokenCache::new();
            cache.count_messages(&counter, c);
            cache
        })
        .collect();
    group.bench_function("token_cache_warm", |b| {
        b.iter(|| {
            conversations
                .iter()
                .zip(&caches)
                .map(|(c, cache)| cache.count_messages(&counter, c).total)
                .sum::<usize>()
        })
    });
    // The same through the messages as a conversation shares them: a pointer comparison each.
    let shared: Vec<Vec<Arc<ChatMessage>>> = conversations
        .iter()
        .map(|c| c.iter().cloned().map(Arc::new).collect())
        .collect();
    let shared_caches: Vec<TokenCache> = shared
        .iter()
        .map(|c| {
            let cache = TokenCache::new();
            cache.count_shared(&counter, c);
            cache
        })
        .collect();
    group.bench_function("token_cache_warm_shared", |b| {
        b.iter(|| {
            shared
                .iter()
                .zip(&shared_caches)
                .map(|(c, cache)| cache.count_shared(&counter, c).total)
                .sum::<usize>()
        })
    });
    group.finish();

    // A growing conversation: everything counted before, one new message per turn.
    let largest = conversations
        .iter()
        .max_by_key(|c| c.len())
        .cloned()
        .unwrap_or_default();
    let last = largest.last().map(|m| m.id);
    let mut group = criterion.benchmark_group("recount_after_one_new_message");
    group.throughput(Throughput::Bytes(
        largest.iter().map(|m| m.text().len() as u64).sum(),
    ));
    let incremental = TokenCache::new();
    incremental.count_messages(&counter, &largest);
    group.bench_function("token_cache_incremental", |b| {
        b.iter(|| {
            if let Some(last) = last {
                incremental.forget(last);
            }
            incremental.count_messages(&counter, &largest).total
        })
    });
    group.bench_function("uncached_full_recount", |b| {
        b.iter(|| counter.count_messages(&largest))
    });
    group.finish();

    drop(messages);
    criterion.final_summary();
}
