//! Scale: many idle agents, and many agents asking each other at once, against the raw tokio
//! and raw ractor equivalents, all in one process and one run.
//!
//! Run: `cargo bench -p troupe-runtime --bench scale` (about 30 s on 2 cores).
//!
//! - **Idle**: `TROUPE_BENCH_IDLE_AGENTS` (default 100 000) idle agents — troupe agents in one
//!   `Team::spawn_many`, tokio tasks each waiting on an unbounded mpsc receiver of
//!   `(String, oneshot::Sender<String>)`, or bare ractor echo actors spawned one by one — the
//!   spawn time (median of `TROUPE_BENCH_SCALE_ROUNDS` rounds, default 5, the three ways
//!   interleaved round by round) and, in the first round, live heap bytes per agent (a counting
//!   global allocator) and RSS per agent (`/proc/self/statm` delta). Heap is the figure to
//!   compare: RSS deltas depend on what earlier rounds left in the allocator.
//! - **Asks**: `TROUPE_BENCH_ASKERS` (default 1 000) askers, each with its own responder (so
//!   2 000 agents), every asker making `TROUPE_BENCH_ASKS_EACH` (default 100) sequential asks
//!   of its responder while all askers run concurrently: throughput (asks per second over the
//!   wall time of the whole burst) and p50/p99 of one ask's latency. Troupe: agents asking
//!   through `AgentContext::directory`; tokio: tasks over mpsc + oneshot; ractor: actors asking
//!   with `call`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod asks;
#[path = "../common/mod.rs"]
mod common;
mod idle;

use common::heap::Counting;
use common::runtime;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One way of holding many idle agents.
#[derive(Clone, Copy)]
pub(crate) enum Way {
    Troupe,
    Tokio,
    Ractor,
}

pub(crate) const WAYS: [(&str, Way); 3] = [
    ("troupe (Team::spawn_many)", Way::Troupe),
    ("raw tokio (task + mpsc)", Way::Tokio),
    ("raw ractor (Actor::spawn)", Way::Ractor),
];

fn main() {
    // `cargo bench` passes `--bench`; a filter that excludes us skips the measurement.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"scale".contains(&a))
    {
        return;
    }
    let idle = env_usize("TROUPE_BENCH_IDLE_AGENTS", 100_000);
    let rounds = env_usize("TROUPE_BENCH_SCALE_ROUNDS", 5).max(1);
    let askers = env_usize("TROUPE_BENCH_ASKERS", 1_000);
    let asks = env_usize("TROUPE_BENCH_ASKS_EACH", 100).max(1);
    let rt = runtime();
    if idle > 0 {
        idle::report(&rt, idle, rounds);
    }
    if askers > 0 {
        asks::report(&rt, askers, asks, rounds);
    }
}
