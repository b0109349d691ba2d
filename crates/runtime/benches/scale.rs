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

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::any::Any;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint, Team,
    TeamConfig,
};

use common::{echo_factory, median, runtime};

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

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the raw tokio echo task receives.
type EchoMsg = (String, oneshot::Sender<String>);

/// A request to a bare ractor echo actor.
struct Ping(String, ractor::RpcReplyPort<String>);

impl ractor::Message for Ping {}

/// The bare ractor echo actor: answers with the request's text.
struct RactorEcho;

impl ractor::Actor for RactorEcho {
    type Msg = Ping;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<Ping>,
        _args: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ractor::ActorRef<Ping>,
        Ping(text, reply): Ping,
        _state: &mut (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        let _ = reply.send(text);
        Ok(())
    }
}

/// The raw tokio echo task: answers each request with its text until every sender is gone.
async fn tokio_echo(mut rx: mpsc::UnboundedReceiver<EchoMsg>) {
    while let Some((text, reply)) = rx.recv().await {
        let _ = reply.send(text);
    }
}

/// One way of holding many idle agents.
#[derive(Clone, Copy)]
enum Way {
    Troupe,
    Tokio,
    Ractor,
}

const WAYS: [(&str, Way); 3] = [
    ("troupe (Team::spawn_many)", Way::Troupe),
    ("raw tokio (task + mpsc)", Way::Tokio),
    ("raw ractor (Actor::spawn)", Way::Ractor),
];

/// Spawn time, heap and RSS bytes per agent of one round of `n` idle agents.
struct IdleRound {
    spawn_ms: f64,
    heap_per_agent: f64,
    rss_per_agent: f64,
}

/// Spawn `n` idle agents one way, check the last one answers, measure, tear down.
async fn idle_round(n: usize, way: Way) -> IdleRound {
    let settle = Duration::from_millis(200);
    match way {
        Way::Troupe => {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let factory = echo_factory();
            team.spawn("warm-up", factory.clone()).await.unwrap();
            team.ask("warm-up", "hi").await.unwrap();
            let names: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
            let heap_before = LIVE.load(Ordering::Relaxed);
            let rss_before = rss_bytes();
            let started = Instant::now();
            let results = team
                .spawn_many(names.into_iter().map(|name| (name, factory.clone())))
                .await
                .unwrap();
            let spawn_ms = started.elapsed().as_secs_f64() * 1000.0;
            assert!(results.iter().all(Result::is_ok));
            team.ask(&format!("a{}", n - 1), "up?").await.unwrap();
            tokio::time::sleep(settle).await;
            let round = measured(n, spawn_ms, heap_before, rss_before);
            team.shutdown().await;
            round
        }
        Way::Tokio => {
            let heap_before = LIVE.load(Ordering::Relaxed);
            let rss_before = rss_bytes();
            let started = Instant::now();
            let mut senders = Vec::with_capacity(n);
            let mut tasks = Vec::with_capacity(n);
            for _ in 0..n {
                let (tx, rx) = mpsc::unbounded_channel::<EchoMsg>();
                tasks.push(tokio::spawn(tokio_echo(rx)));
                senders.push(tx);
            }
            let spawn_ms = started.elapsed().as_secs_f64() * 1000.0;
            let (reply, answer) = oneshot::channel();
            senders[n - 1].send(("up?".into(), reply)).unwrap();
            answer.await.unwrap();
            tokio::time::sleep(settle).await;
            let round = measured(n, spawn_ms, heap_before, rss_before);
            drop(senders);
            for task in tasks {
                task.await.unwrap();
            }
            round
        }
        Way::Ractor => {
            let heap_before = LIVE.load(Ordering::Relaxed);
            let rss_before = rss_bytes();
            let started = Instant::now();
            let mut actors = Vec::with_capacity(n);
            for _ in 0..n {
                actors.push(ractor::Actor::spawn(None, RactorEcho, ()).await.unwrap());
            }
            let spawn_ms = started.elapsed().as_secs_f64() * 1000.0;
            let last = &actors[n - 1].0;
            let answer = last
                .call(|reply| Ping("up?".into(), reply), None)
                .await
                .unwrap();
            assert!(answer.is_success());
            tokio::time::sleep(settle).await;
            let round = measured(n, spawn_ms, heap_before, rss_before);
            for (actor, _) in &actors {
                actor.stop(None);
            }
            for (_, handle) in actors {
                handle.await.unwrap();
            }
            round
        }
    }
}

fn measured(n: usize, spawn_ms: f64, heap_before: isize, rss_before: usize) -> IdleRound {
    IdleRound {
        spawn_ms,
        heap_per_agent: (LIVE.load(Ordering::Relaxed) - heap_before) as f64 / n as f64,
        rss_per_agent: rss_bytes().saturating_sub(rss_before) as f64 / n as f64,
    }
}

fn idle_report(rt: &tokio::runtime::Runtime, n: usize, rounds: usize) {
    let mut spawn_ms = vec![Vec::new(); WAYS.len()];
    let mut memory = vec![(0.0, 0.0); WAYS.len()];
    for round in 0..rounds {
        for (i, (_, way)) in WAYS.iter().enumerate() {
            let result = rt.block_on(idle_round(n, *way));
            spawn_ms[i].push(result.spawn_ms);
            if round == 0 {
                memory[i] = (result.heap_per_agent, result.rss_per_agent);
            }
        }
    }
    println!("idle agents: {n}, {rounds} rounds, ways interleaved");
    println!("| way | spawn median | per agent | heap per agent | RSS per agent |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (i, (label, _)) in WAYS.iter().enumerate() {
        let m = median(spawn_ms[i].clone());
        println!(
            "| {label} | {m:.1} ms | {:.2} µs | {:.2} KiB | {:.2} KiB |",
            m * 1000.0 / n as f64,
            memory[i].0 / 1024.0,
            memory[i].1 / 1024.0,
        );
    }
}

/// Latencies (ns) every asker records, shared by all of one burst's askers.
type Latencies = Arc<Mutex<Vec<u64>>>;

/// A troupe agent that, asked anything, asks its peer `asks` times in a row and records how
/// long each ask took.
struct Asker {
    peer: String,
    asks: usize,
    latencies: Latencies,
}

#[async_trait]
impl AgentBehavior for Asker {
    async fn handle(
        &mut self,
        _request: AgentRequest,
        ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        let mut mine = Vec::with_capacity(self.asks);
        for _ in 0..self.asks {
            let started = Instant::now();
            let answer = ctx
                .directory
                .ask(
                    &self.peer,
                    AgentRequest::from_user("ping"),
                    Duration::from_secs(60),
                )
                .await;
            mine.push(started.elapsed().as_nanos() as u64);
            std::hint::black_box(answer.unwrap());
        }
        self.latencies.lock().unwrap().extend(mine);
        Ok(String::new())
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }

    fn update_checkpoint(&self, _checkpoint: &mut Checkpoint) {}

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn asker_factory(peer: String, asks: usize, latencies: Latencies) -> BehaviorFactory {
    Arc::new(move |_checkpoint: Option<Checkpoint>| {
        Ok(Box::new(Asker {
            peer: peer.clone(),
            asks,
            latencies: latencies.clone(),
        }) as Box<dyn AgentBehavior>)
    })
}

/// Go: ask your responder `asks` times, then answer.
struct Go(ractor::RpcReplyPort<()>);

impl ractor::Message for Go {}

/// The ractor asker: on `Go`, `call`s its responder `asks` times, recording each latency.
struct RactorAsker;

struct RactorAskerState {
    peer: ractor::ActorRef<Ping>,
    asks: usize,
    latencies: Latencies,
}

impl ractor::Actor for RactorAsker {
    type Msg = Go;
    type State = RactorAskerState;
    type Arguments = RactorAskerState;

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<Go>,
        args: RactorAskerState,
    ) -> Result<RactorAskerState, ractor::ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ractor::ActorRef<Go>,
        Go(reply): Go,
        state: &mut RactorAskerState,
    ) -> Result<(), ractor::ActorProcessingErr> {
        let mut mine = Vec::with_capacity(state.asks);
        for _ in 0..state.asks {
            let started = Instant::now();
            let answer = state
                .peer
                .call(|reply| Ping("ping".into(), reply), None)
                .await?;
            mine.push(started.elapsed().as_nanos() as u64);
            std::hint::black_box(answer.is_success());
        }
        state.latencies.lock().unwrap().extend(mine);
        let _ = reply.send(());
        Ok(())
    }
}

/// One burst: wall time and every ask's latency.
struct Burst {
    wall: Duration,
    latencies: Vec<u64>,
}

/// `askers` askers, each asking its own responder `asks` times, all at once.
async fn ask_burst(askers: usize, asks: usize, way: Way) -> Burst {
    let latencies: Latencies = Arc::new(Mutex::new(Vec::with_capacity(askers * asks)));
    let wall = match way {
        Way::Troupe => {
            let team = Arc::new(Team::start(TeamConfig::default()).await.unwrap());
            let echo = echo_factory();
            let agents = (0..askers).flat_map(|i| {
                [
                    (format!("r{i}"), echo.clone()),
                    (
                        format!("q{i}"),
                        asker_factory(format!("r{i}"), asks, latencies.clone()),
                    ),
                ]
            });
            let results = team.spawn_many(agents).await.unwrap();
            assert!(results.iter().all(Result::is_ok));
            let started = Instant::now();
            let drivers: Vec<_> = (0..askers)
                .map(|i| {
                    let team = team.clone();
                    tokio::spawn(async move { team.ask(&format!("q{i}"), "go").await.unwrap() })
                })
                .collect();
            for driver in drivers {
                driver.await.unwrap();
            }
            let wall = started.elapsed();
            Arc::into_inner(team).unwrap().shutdown().await;
            wall
        }
        Way::Tokio => {
            let responders: Vec<_> = (0..askers)
                .map(|_| {
                    let (tx, rx) = mpsc::unbounded_channel::<EchoMsg>();
                    tokio::spawn(tokio_echo(rx));
                    tx
                })
                .collect();
            let started = Instant::now();
            let tasks: Vec<_> = responders
                .into_iter()
                .map(|peer| {
                    let latencies = latencies.clone();
                    tokio::spawn(async move {
                        let mut mine = Vec::with_capacity(asks);
                        for _ in 0..asks {
                            let t = Instant::now();
                            let (reply, answer) = oneshot::channel();
                            peer.send(("ping".into(), reply)).unwrap();
                            std::hint::black_box(answer.await.unwrap());
                            mine.push(t.elapsed().as_nanos() as u64);
                        }
                        latencies.lock().unwrap().extend(mine);
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            started.elapsed()
        }
        Way::Ractor => {
            let mut actors = Vec::with_capacity(askers * 2);
            let mut asker_refs = Vec::with_capacity(askers);
            for _ in 0..askers {
                let (peer, peer_handle) = ractor::Actor::spawn(None, RactorEcho, ()).await.unwrap();
                let state = RactorAskerState {
                    peer: peer.clone(),
                    asks,
                    latencies: latencies.clone(),
                };
                let (asker, asker_handle) = ractor::Actor::spawn(None, RactorAsker, state)
                    .await
                    .unwrap();
                asker_refs.push(asker.clone());
                actors.push((peer.get_cell(), peer_handle));
                actors.push((asker.get_cell(), asker_handle));
            }
            let started = Instant::now();
            let calls: Vec<_> = asker_refs
                .into_iter()
                .map(|asker| {
                    tokio::spawn(async move {
                        let done = asker.call(Go, None).await.unwrap();
                        assert!(done.is_success());
                    })
                })
                .collect();
            for call in calls {
                call.await.unwrap();
            }
            let wall = started.elapsed();
            for (cell, _) in &actors {
                cell.stop(None);
            }
            for (_, handle) in actors {
                handle.await.unwrap();
            }
            wall
        }
    };
    let latencies = std::mem::take(&mut *latencies.lock().unwrap());
    assert_eq!(latencies.len(), askers * asks);
    Burst { wall, latencies }
}

/// The `q`-quantile (0..=1) of sorted `values`.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ask_report(rt: &tokio::runtime::Runtime, askers: usize, asks: usize, rounds: usize) {
    let mut throughput = vec![Vec::new(); WAYS.len()];
    let mut all_latencies = vec![Vec::new(); WAYS.len()];
    for _ in 0..rounds {
        for (i, (_, way)) in WAYS.iter().enumerate() {
            let burst = rt.block_on(ask_burst(askers, asks, *way));
            throughput[i].push((askers * asks) as f64 / burst.wall.as_secs_f64());
            all_latencies[i].extend(burst.latencies);
        }
    }
    println!(
        "\nconcurrent asks: {askers} askers × {asks} asks each of their own responder, \
         {rounds} rounds, ways interleaved; latencies pooled over the rounds"
    );
    println!("| way | throughput (median) | p50 | p99 |");
    println!("| --- | ---: | ---: | ---: |");
    let labels = [
        "troupe (agents, Directory::ask)",
        "raw tokio (mpsc + oneshot)",
        "raw ractor (call)",
    ];
    for (i, label) in labels.iter().enumerate() {
        let mut sorted = std::mem::take(&mut all_latencies[i]);
        sorted.sort_unstable();
        println!(
            "| {label} | {:.0} asks/s | {:.1} µs | {:.1} µs |",
            median(throughput[i].clone()),
            quantile(&sorted, 0.50) as f64 / 1000.0,
            quantile(&sorted, 0.99) as f64 / 1000.0,
        );
    }
}

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
        idle_report(&rt, idle, rounds);
    }
    if askers > 0 {
        ask_report(&rt, askers, asks, rounds);
    }
}
