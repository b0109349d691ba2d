//! Runtime overhead against raw tokio, measured in the same run on the same runtime.
//!
//! Run: `cargo bench -p troupe-runtime --bench runtime`
//! (quicker: `… -- --warm-up-time 1 --measurement-time 3`; the spawn measurement always runs
//! `TROUPE_BENCH_SPAWN_ROUNDS` rounds, default 5, of `TROUPE_BENCH_SPAWN_N` agents, default 10 000).
//!
//! - `ask/agent` — one `Team::ask_with` round trip to a trivial agent (an actor that echoes the
//!   request text and checkpoints an empty conversation) vs `ask/raw_tokio` — one request over a
//!   tokio mpsc channel to an echo task that answers on a oneshot. Goal: agent ≤ 1.2 × raw.
//!   `ask/raw_ractor` is the floor under `ask/agent`: one `call` to a bare ractor actor that
//!   echoes (the actor library's mailbox and reply port, nothing of troupe's).
//! - spawning 10 000 idle agents under one supervisor (goal < 100 ms), one `Team::spawn` each
//!   and with one `Team::spawn_many`: printed as the median of the rounds, not through criterion
//!   (one sample takes too long for criterion's sampling).
//! - `event_bus/*` — publishing one event to 100 subscribers: `publish_try_recv` publishes and
//!   drains all 100 receivers on one thread (the cost of the fan-out itself), next to the same
//!   with a bare `tokio::sync::broadcast` channel; `publish_to_100_tasks` publishes and waits
//!   until 100 subscriber tasks have each received it (wake-up latency included).
//!
//! - `ask_history/{100,10000,100000}` — one `Team::ask_with` round trip to an agent that keeps
//!   its conversation as `LlmAgent` does (common/history.rs: each request pushes two realistic
//!   messages, corpus messages when `../shared/corpus` is there, and is checkpointed), holding
//!   that many messages. Goal: the `100000` median ≤ 1.3 × the `100` median — a request's cost
//!   must not grow with the history. Every `HISTORY_RESET_EVERY` requests, outside the timed
//!   part, the agent rewinds to its first `n` messages (as a failed request rolls back), and
//!   one untimed request follows.
//!
//! Memory per idle agent is measured by the `agent_memory` bench (it needs its own allocator).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;
use tokio::sync::{Notify, broadcast, mpsc, oneshot};
use troupe_protocol::{Event, EventRecord};
use troupe_runtime::{AgentRequest, EventBus, Team, TeamConfig};

use common::history::{HistoryAgent, history_factory, history_of, sample_messages};
use common::raw::{EchoMsg, Ping, RactorEcho};
use common::{echo_factory, env_or, median, runtime};

/// Requests timed between two resets of an `ask_history` agent's history (so a `100`-message
/// history stays between 100 and 100 + 2 × this many messages).
const HISTORY_RESET_EVERY: u64 = 25;

fn bench_ask(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let team = rt.block_on(async {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        team.spawn("echo", echo_factory()).await.unwrap();
        team
    });
    let (tx, mut rx) = mpsc::channel::<EchoMsg>(64);
    rt.spawn(async move {
        while let Some((text, reply)) = rx.recv().await {
            let _ = reply.send(text);
        }
    });
    let request = AgentRequest::from_user("ping");
    let timeout = Duration::from_secs(10);

    let mut group = c.benchmark_group("ask");
    group.bench_function("raw_tokio", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let (reply, answer) = oneshot::channel();
                    tx.send(("ping".to_string(), reply)).await.unwrap();
                    std::hint::black_box(answer.await.unwrap());
                }
                started.elapsed()
            })
        });
    });
    let (ractor_echo, ractor_task) = rt
        .block_on(ractor::Actor::spawn(None, RactorEcho, ()))
        .unwrap();
    group.bench_function("raw_ractor", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let answer = ractor_echo
                        .call(|reply| Ping("ping".to_string(), reply), Some(timeout))
                        .await;
                    std::hint::black_box(answer.unwrap());
                }
                started.elapsed()
            })
        });
    });
    ractor_echo.stop(None);
    rt.block_on(ractor_task).unwrap();
    group.bench_function("agent", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let answer = team.ask_with("echo", request.clone(), timeout).await;
                    std::hint::black_box(answer.unwrap());
                }
                started.elapsed()
            })
        });
    });
    group.finish();
    rt.block_on(team.shutdown());
}

fn bench_ask_history(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let samples = sample_messages();
    let answer = samples
        .iter()
        .find(|m| m.role == troupe_protocol::Role::Assistant && m.text().len() > 200)
        .cloned()
        .unwrap_or_else(|| troupe_protocol::ChatMessage::assistant("done ".repeat(100)));
    let timeout = Duration::from_secs(60);
    let mut group = c.benchmark_group("ask_history");
    // A 100 000-message history made a request cost milliseconds: ten samples keep a run short.
    group.sample_size(10);
    for n in [100usize, 10_000, 100_000] {
        let team = rt.block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let factory = history_factory(history_of(&samples, n), answer.clone());
            team.spawn("keeper", factory).await.unwrap();
            team
        });
        let request = AgentRequest::from_user("what changed in src/parser.rs since yesterday?");
        group.bench_function(n.to_string(), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut timed = Duration::ZERO;
                    let mut done = 0;
                    while done < iters {
                        let batch = HISTORY_RESET_EVERY.min(iters - done);
                        team.with_agent::<HistoryAgent, _, _>("keeper", HistoryAgent::reset)
                            .await
                            .unwrap()
                            .unwrap();
                        // Untimed, as the reset: the checkpoint's first catch-up after it.
                        let answer = team.ask_with("keeper", request.clone(), timeout).await;
                        std::hint::black_box(answer.unwrap());
                        let started = Instant::now();
                        for _ in 0..batch {
                            let answer = team.ask_with("keeper", request.clone(), timeout).await;
                            std::hint::black_box(answer.unwrap());
                        }
                        timed += started.elapsed();
                        done += batch;
                    }
                    timed
                })
            });
        });
        let len = rt.block_on(team.with_agent::<HistoryAgent, _, _>("keeper", |a| a.len()));
        assert!(len.unwrap().unwrap() >= n);
        rt.block_on(team.shutdown());
    }
    group.finish();
}

/// How one round spawns its agents.
#[derive(Clone, Copy)]
enum SpawnWay {
    /// `Team::spawn` per agent.
    OneByOne,
    /// One `Team::spawn_many`.
    Batch,
}

/// Spawn `n` idle agents into a fresh team; the spawn and shutdown times.
fn spawn_round(rt: &tokio::runtime::Runtime, n: usize, way: SpawnWay) -> (f64, f64) {
    rt.block_on(async {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        let factory = echo_factory();
        let started = Instant::now();
        match way {
            SpawnWay::OneByOne => {
                for i in 0..n {
                    team.spawn(format!("a{i}"), factory.clone()).await.unwrap();
                }
            }
            SpawnWay::Batch => {
                let results = team
                    .spawn_many((0..n).map(|i| (format!("a{i}"), factory.clone())))
                    .await
                    .unwrap();
                assert!(results.iter().all(Result::is_ok));
            }
        }
        let spawn = started.elapsed();
        // Every agent answers: they really are up.
        team.ask(&format!("a{}", n - 1), "up?").await.unwrap();
        let started = Instant::now();
        team.shutdown().await;
        (
            spawn.as_secs_f64() * 1000.0,
            started.elapsed().as_secs_f64() * 1000.0,
        )
    })
}

/// Spawn `n` idle agents into a fresh team, `rounds` times each way (interleaved); prints the
/// median times.
fn spawn_report(rt: &tokio::runtime::Runtime) {
    let n = env_or("TROUPE_BENCH_SPAWN_N", 10_000);
    let rounds = env_or("TROUPE_BENCH_SPAWN_ROUNDS", 5);
    let ways = [
        ("spawn", SpawnWay::OneByOne),
        ("spawn_many", SpawnWay::Batch),
    ];
    let mut spawn_ms = vec![Vec::new(); ways.len()];
    let mut shutdown_ms = vec![Vec::new(); ways.len()];
    for _ in 0..rounds {
        for (i, (_, way)) in ways.iter().enumerate() {
            let (spawn, shutdown) = spawn_round(rt, n, *way);
            spawn_ms[i].push(spawn);
            shutdown_ms[i].push(shutdown);
        }
    }
    for (i, (label, _)) in ways.iter().enumerate() {
        let times = &spawn_ms[i];
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        let max = times.iter().copied().fold(0.0, f64::max);
        println!(
            "{label}/{n}_idle_agents: median {:.1} ms (min {min:.1}, max {max:.1}, {rounds} rounds; \
             {:.2} µs per agent); shutdown median {:.1} ms",
            median(times.clone()),
            median(times.clone()) * 1000.0 / n as f64,
            median(shutdown_ms[i].clone())
        );
    }
}

fn event() -> Event {
    Event::RequestStarted {
        agent: "bench".into(),
    }
}

fn bench_event_bus(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    const SUBSCRIBERS: usize = 100;
    let mut group = c.benchmark_group("event_bus");

    let bus = EventBus::new(1024);
    let mut receivers: Vec<_> = (0..SUBSCRIBERS).map(|_| bus.subscribe()).collect();
    group.bench_function("publish_try_recv_100_subscribers", |b| {
        b.iter(|| {
            bus.publish(None, event());
            for r in &mut receivers {
                std::hint::black_box(r.try_recv().unwrap());
            }
        });
    });
    drop(receivers);

    let (raw, _) = broadcast::channel::<EventRecord>(1024);
    let mut receivers: Vec<_> = (0..SUBSCRIBERS).map(|_| raw.subscribe()).collect();
    group.bench_function("raw_broadcast_try_recv_100_subscribers", |b| {
        b.iter(|| {
            let _ = raw.send(EventRecord {
                seq: 1,
                at_ms: 0,
                trace_id: None,
                event: event(),
            });
            for r in &mut receivers {
                std::hint::black_box(r.try_recv().unwrap());
            }
        });
    });
    drop(receivers);

    // 100 subscriber tasks; the last one to receive an event wakes the publisher.
    let bus = EventBus::new(1024);
    let received = Arc::new(AtomicUsize::new(0));
    let all_received = Arc::new(Notify::new());
    let mut tasks = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let mut rx = bus.subscribe();
        let received = received.clone();
        let all_received = all_received.clone();
        tasks.push(rt.spawn(async move {
            while let Ok(record) = rx.recv().await {
                std::hint::black_box(record);
                if received.fetch_add(1, Ordering::AcqRel) + 1 == SUBSCRIBERS {
                    all_received.notify_one();
                }
            }
        }));
    }
    group.bench_function("publish_to_100_tasks", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    received.store(0, Ordering::Release);
                    let done = all_received.notified();
                    bus.publish(None, event());
                    done.await;
                }
                started.elapsed()
            })
        });
    });
    group.finish();
    drop(bus);
    rt.block_on(async {
        for task in tasks {
            let _ = task.await;
        }
    });
}

fn main() {
    let rt = runtime();
    let mut criterion = Criterion::default().configure_from_args();
    bench_ask(&mut criterion, &rt);
    bench_ask_history(&mut criterion, &rt);
    bench_event_bus(&mut criterion, &rt);
    criterion.final_summary();
    spawn_report(&rt);
}
