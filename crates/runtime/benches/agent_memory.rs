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

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use troupe_runtime::{Team, TeamConfig};

use common::heap::{Counting, live_bytes, rss_bytes};
use common::history::{history_factory, history_of, sample_messages};
use common::{echo_factory, runtime};
use troupe_protocol::Conversation;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

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
        let heap_before = live_bytes();
        let rss_before = rss_bytes();
        for i in 0..n {
            team.spawn(format!("a{i}"), factory.clone()).await.unwrap();
        }
        // Let every actor finish starting up.
        team.ask(&format!("a{}", n - 1), "up?").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let heap = (live_bytes() - heap_before) as f64 / n as f64;
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
    let before = live_bytes();
    let alone = Conversation::from_messages(history.iter().cloned());
    let conversation_bytes = (live_bytes() - before) as f64;
    drop(alone);
    rt.block_on(async {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        // One factory (its base history is the bench's, not an agent's), made before counting.
        let factory = history_factory(history, answer);
        let heap_before = live_bytes();
        let rss_before = rss_bytes();
        for i in 0..n {
            team.spawn(format!("h{i}"), factory.clone()).await.unwrap();
            team.ask(&format!("h{i}"), "one request").await.unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let heap = (live_bytes() - heap_before) as f64 / n as f64;
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
