//! Memory per idle agent (goal < 16 KiB), two ways: live heap bytes counted by a global
//! allocator, and the process's resident set (RSS, from `/proc/self/statm`) before and after.
//!
//! Run: `cargo bench -p troupe-runtime --bench agent_memory`
//! (`TROUPE_BENCH_AGENTS` sets how many agents, default 10 000).
//!
//! Then the same for agents that hold a conversation (common/history.rs, as `LlmAgent` keeps
//! it: live and in its checkpoint) of 10 000 realistic messages, answered once each:
//! `TROUPE_BENCH_HISTORY_AGENTS` of them (default 10), against the heap one such conversation
//! takes on its own (goal: ≤ 1.2 ×).
//!
//! Both deltas are taken after one warm-up agent, so the supervisor, the runtime's worker
//! threads and the directory's first allocation are not charged to the agents. The heap figure
//! counts every byte the agents keep allocated (actor, mailbox channels, tokio task, directory
//! entry, checkpoint slot, behaviour); the RSS figure adds allocator slack and fragmentation.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use troupe_runtime::{Team, TeamConfig};

use common::history::{history_factory, history_of, sample_messages};
use common::{echo_factory, runtime};
use troupe_runtime::Conversation;

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Resident set size in bytes.
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let n: usize = std::env::var("TROUPE_BENCH_AGENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    // `cargo bench` passes `--bench`; a filter that excludes us skips the measurement.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"agent_memory".contains(&a))
    {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        let factory = echo_factory();
        team.spawn("warm-up", factory.clone()).await.unwrap();
        team.ask("warm-up", "hi").await.unwrap();
        let heap_before = LIVE.load(Ordering::Relaxed);
        let rss_before = rss_bytes();
        for i in 0..n {
            team.spawn(format!("a{i}"), factory.clone()).await.unwrap();
        }
        // Let every actor finish starting up.
        team.ask(&format!("a{}", n - 1), "up?").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let heap = (LIVE.load(Ordering::Relaxed) - heap_before) as f64 / n as f64;
        let rss = rss_bytes().saturating_sub(rss_before) as f64 / n as f64;
        println!(
            "memory per idle agent ({n} agents): heap {:.2} KiB (live bytes from the allocator), \
             RSS {:.2} KiB (/proc/self/statm delta)",
            heap / 1024.0,
            rss / 1024.0
        );
        team.shutdown().await;
    });
    history_memory(&rt);
}

/// Heap and RSS per idle agent holding a 10 000-message conversation, against the heap that
/// conversation takes alone.
fn history_memory(rt: &tokio::runtime::Runtime) {
    const MESSAGES: usize = 10_000;
    let n: usize = std::env::var("TROUPE_BENCH_HISTORY_AGENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let samples = sample_messages();
    let answer = samples[samples.len() / 2].clone();
    let history = history_of(&samples, MESSAGES);
    let before = LIVE.load(Ordering::Relaxed);
    let alone = Conversation::from_messages(history.iter().cloned());
    let conversation_bytes = (LIVE.load(Ordering::Relaxed) - before) as f64;
    drop(alone);
    rt.block_on(async {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        // One factory (its base history is the bench's, not an agent's), made before counting.
        let factory = history_factory(history, answer);
        let heap_before = LIVE.load(Ordering::Relaxed);
        let rss_before = rss_bytes();
        for i in 0..n {
            team.spawn(format!("h{i}"), factory.clone()).await.unwrap();
            team.ask(&format!("h{i}"), "one request").await.unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let heap = (LIVE.load(Ordering::Relaxed) - heap_before) as f64 / n as f64;
        let rss = rss_bytes().saturating_sub(rss_before) as f64 / n as f64;
        println!(
            "memory per idle agent holding {MESSAGES} messages ({n} agents): heap {:.1} MiB, \
             RSS {:.1} MiB; the conversation alone {:.1} MiB: heap {:.2} ×, RSS {:.2} ×",
            heap / 1048576.0,
            rss / 1048576.0,
            conversation_bytes / 1048576.0,
            heap / conversation_bytes,
            rss / conversation_bytes,
        );
        team.shutdown().await;
    });
}
