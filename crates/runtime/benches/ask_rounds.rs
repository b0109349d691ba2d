//! `ask` against its raw baselines in interleaved rounds: the same comparison as the `ask`
//! group of `runtime.rs`, measured so that the three see the same machine.
//!
//! Run: `cargo bench -p troupe-runtime --bench ask_rounds`
//! (`TROUPE_BENCH_ASK_ROUNDS`, default 31, rounds of `TROUPE_BENCH_ASK_BATCH`, default 2 000,
//! asks per contender; `TROUPE_BENCH_ASK_RUNTIME=multi_thread` or `current_thread` runs one
//! runtime alone, for a profiler).
//!
//! Criterion times `ask/raw_tokio`, `ask/raw_ractor` and `ask/agent` one after another, seconds
//! apart. On a 2-core machine a round trip's cost is mostly the two cross-thread wake-ups, and
//! those moved 2.5× between runs as the scheduler placed the tasks differently — more than the
//! difference being measured. Here every round times one batch of each contender, in an order
//! that rotates from round to round, and the ratio is taken within the round: what drifts
//! between rounds cancels out. The report gives each contender's median time per ask and the
//! median, min and max of the per-round ratios.
//!
//! Two runtimes, one after the other:
//! - `multi_thread`: tokio's default multi-threaded runtime, as a program using troupe runs; the
//!   asker is the bench's `block_on` thread, the agent a task on a worker.
//! - `current_thread`: everything on one thread, so no wake-up crosses threads and the times are
//!   the CPU work of a round trip alone: what troupe adds over the raw channels, undiluted.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use ractor::ActorRef;
use tokio::sync::{mpsc, oneshot};
use troupe_runtime::{AgentRequest, Team, TeamConfig};

use common::raw::{EchoMsg, Ping, RactorEcho, tokio_echo};
use common::{echo_factory, env_or, median};

/// The three ways of asking, each ready to answer.
struct Contenders {
    tokio: mpsc::UnboundedSender<EchoMsg>,
    ractor: ActorRef<Ping>,
    team: Team,
}

/// `raw_tokio_timeout` is `raw_tokio` awaiting its answer under `tokio::time::timeout`, as every
/// ask does (ractor's `call` and troupe's `ask_with` alike): the timer's share of the gap.
const NAMES: [&str; 4] = ["raw_tokio", "raw_tokio_timeout", "raw_ractor", "agent"];
const RAW_TOKIO: usize = 0;
const RAW_TOKIO_TIMEOUT: usize = 1;
const RAW_RACTOR: usize = 2;
const AGENT: usize = 3;
const TIMEOUT: Duration = Duration::from_secs(10);

impl Contenders {
    async fn start() -> Self {
        let (tokio, rx) = mpsc::unbounded_channel();
        tokio::spawn(tokio_echo(rx));
        let (ractor, _) = ractor::Actor::spawn(None, RactorEcho, ()).await.unwrap();
        let team = Team::start(TeamConfig::default()).await.unwrap();
        team.spawn("echo", echo_factory()).await.unwrap();
        Contenders {
            tokio,
            ractor,
            team,
        }
    }

    /// Time `n` round trips of contender `which` (an index into [`NAMES`]).
    async fn time(&self, which: usize, n: usize, request: &AgentRequest) -> Duration {
        let started = Instant::now();
        match which {
            RAW_TOKIO => {
                for _ in 0..n {
                    let (reply, answer) = oneshot::channel();
                    self.tokio.send(("ping".to_string(), reply)).unwrap();
                    std::hint::black_box(answer.await.unwrap());
                }
            }
            RAW_TOKIO_TIMEOUT => {
                for _ in 0..n {
                    let (reply, answer) = oneshot::channel();
                    self.tokio.send(("ping".to_string(), reply)).unwrap();
                    let answer = tokio::time::timeout(TIMEOUT, answer).await;
                    std::hint::black_box(answer.unwrap().unwrap());
                }
            }
            RAW_RACTOR => {
                for _ in 0..n {
                    let answer = self
                        .ractor
                        .call(|reply| Ping("ping".to_string(), reply), Some(TIMEOUT))
                        .await;
                    std::hint::black_box(answer.unwrap());
                }
            }
            _ => {
                for _ in 0..n {
                    let answer = self.team.ask_with("echo", request.clone(), TIMEOUT).await;
                    std::hint::black_box(answer.unwrap());
                }
            }
        }
        started.elapsed()
    }

    async fn stop(self) {
        self.ractor.stop(None);
        self.team.shutdown().await;
    }
}

/// Run the rounds on `rt` and print the report under `label`.
fn report(label: &str, rt: &tokio::runtime::Runtime, rounds: usize, batch: usize) {
    let request = AgentRequest::from_user("ping");
    let per_ask = rt.block_on(async {
        let contenders = Contenders::start().await;
        // One untimed round: every path warm (allocator pools, timer wheel, the agent's mailbox).
        for which in 0..NAMES.len() {
            contenders.time(which, batch, &request).await;
        }
        let mut per_ask = vec![Vec::with_capacity(rounds); NAMES.len()];
        for round in 0..rounds {
            for step in 0..NAMES.len() {
                let which = (round + step) % NAMES.len();
                let took = contenders.time(which, batch, &request).await;
                per_ask[which].push(took.as_secs_f64() * 1e6 / batch as f64);
            }
        }
        contenders.stop().await;
        per_ask
    });
    let ratios = |over: usize, under: usize| -> Vec<f64> {
        per_ask[over]
            .iter()
            .zip(&per_ask[under])
            .map(|(a, b)| a / b)
            .collect()
    };
    let spread = |r: &[f64]| {
        let min = r.iter().copied().fold(f64::INFINITY, f64::min);
        let max = r.iter().copied().fold(0.0, f64::max);
        format!(
            "median {:.2}× (min {min:.2}×, max {max:.2}×)",
            median(r.to_vec())
        )
    };
    println!("ask_rounds/{label}: {rounds} rounds of {batch} asks each");
    for (which, name) in NAMES.iter().enumerate() {
        println!(
            "  {name:<17} median {:.2} µs per ask",
            median(per_ask[which].clone())
        );
    }
    for (over, under) in [
        (AGENT, RAW_TOKIO),
        (AGENT, RAW_TOKIO_TIMEOUT),
        (AGENT, RAW_RACTOR),
        (RAW_RACTOR, RAW_TOKIO),
        (RAW_TOKIO_TIMEOUT, RAW_TOKIO),
    ] {
        println!(
            "  {:<34} {}",
            format!("{} ÷ {}", NAMES[over], NAMES[under]),
            spread(&ratios(over, under))
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to configure on the command line.
    let rounds = env_or("TROUPE_BENCH_ASK_ROUNDS", 31);
    let batch = env_or("TROUPE_BENCH_ASK_BATCH", 2_000);
    let only = std::env::var("TROUPE_BENCH_ASK_RUNTIME").ok();
    let runs = |label: &str| only.as_deref().is_none_or(|o| o == label);
    if runs("multi_thread") {
        report("multi_thread", &common::runtime(), rounds, batch);
    }
    if runs("current_thread") {
        let single = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        report("current_thread", &single, rounds, batch);
    }
}
