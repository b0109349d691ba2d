//! Spawn time and idle memory per agent: troupe agents (a minimal behaviour, and `LlmAgent`s)
//! against raw ractor actors and kameo actors, `PEERS_AGENTS` of each (default 10 000).
//!
//! Memory is the live heap the agents keep, per agent, from a counting global allocator (so
//! allocator slack is not counted), after everything spawned has started and settled. (An RSS
//! delta is no use here: every kind after the first reuses pages the previous one freed.) Each kind is measured `PEERS_ROUNDS` times (default 5) and
//! the median is printed; kinds alternate within a round.
//!
//! Run: `cd benches/peers && CARGO_TARGET_DIR=../../target/peers cargo bench --bench spawn`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kameo::Actor as KameoActor;
use kameo::actor::Spawn as _;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use troupe_agents::{AgentSpec, LlmAgent};
use troupe_models::ScriptedModel;
use troupe_protocol::ChatModel;
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint, Team,
    TeamConfig,
};

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

/// The cheapest troupe agent: answers with the request's text, keeps nothing.
struct Echo;

#[async_trait]
impl AgentBehavior for Echo {
    async fn handle(
        &mut self,
        request: AgentRequest,
        _ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        Ok(request.text)
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }

    fn update_checkpoint(&self, _checkpoint: &mut Checkpoint) {}
}

/// An idle raw ractor actor.
struct IdleRactor;

impl Actor for IdleRactor {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<()>, _args: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// An idle kameo actor.
#[derive(KameoActor)]
struct IdleKameo;

/// One measurement: the time to spawn them all, live heap bytes per agent.
#[derive(Clone, Copy)]
struct Sample {
    spawn: Duration,
    heap: f64,
}

/// Before spawning: the clock and the live heap.
struct Mark(Instant, isize);

impl Mark {
    fn now() -> Self {
        let heap = LIVE.load(Ordering::Relaxed);
        Mark(Instant::now(), heap)
    }

    /// The sample once `n` agents are up (the spawn time is taken now; memory after a pause,
    /// so anything still settling is counted).
    async fn sample(self, n: usize) -> Sample {
        let spawn = self.0.elapsed();
        tokio::time::sleep(Duration::from_millis(200)).await;
        Sample {
            spawn,
            heap: (LIVE.load(Ordering::Relaxed) - self.1) as f64 / n as f64,
        }
    }
}

/// `n` troupe agents made by `factory`, spawned in one supervisor message (`Team::spawn_many`).
async fn troupe(n: usize, factory: impl Fn(usize) -> BehaviorFactory) -> Sample {
    let team = Team::start(TeamConfig::default()).await.expect("a team");
    team.spawn("warm-up", factory(usize::MAX))
        .await
        .expect("spawned");
    let factories: Vec<_> = (0..n).map(|i| (format!("a{i}"), factory(i))).collect();
    let mark = Mark::now();
    let spawned = team.spawn_many(factories).await.expect("spawned");
    let sample = mark.sample(n).await;
    assert!(spawned.iter().all(Result::is_ok));
    team.shutdown().await;
    sample
}

async fn ractor_actors(n: usize) -> Sample {
    let mark = Mark::now();
    let mut actors = Vec::with_capacity(n);
    for _ in 0..n {
        actors.push(Actor::spawn(None, IdleRactor, ()).await.expect("spawned"));
    }
    let sample = mark.sample(n).await;
    for (actor, handle) in actors {
        actor.stop(None);
        let _ = handle.await;
    }
    sample
}

async fn kameo_actors(n: usize) -> Sample {
    let mark = Mark::now();
    let mut actors = Vec::with_capacity(n);
    for _ in 0..n {
        actors.push(IdleKameo::spawn(IdleKameo));
    }
    for actor in &actors {
        actor.wait_for_startup().await;
    }
    let sample = mark.sample(n).await;
    for actor in &actors {
        let _ = actor.stop_gracefully().await;
    }
    for actor in &actors {
        actor.wait_for_shutdown().await;
    }
    drop(actors);
    sample
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter that excludes us skips the measurement.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"spawn".contains(&a))
    {
        return;
    }
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let n = env("PEERS_AGENTS", 10_000);
    let rounds = env("PEERS_ROUNDS", 5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("idle", []));
    let kinds = [
        "troupe (minimal behaviour)",
        "troupe (LlmAgent)",
        "ractor",
        "kameo",
    ];
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); kinds.len()];
    rt.block_on(async {
        // Warm the runtime's threads and each library's statics before anything is counted.
        ractor_actors(10).await;
        kameo_actors(10).await;
        for _ in 0..rounds {
            samples[0].push(
                troupe(n, |_| {
                    Arc::new(|_| Ok(Box::new(Echo) as Box<dyn AgentBehavior>))
                })
                .await,
            );
            samples[1].push(
                troupe(n, |i| {
                    LlmAgent::factory(AgentSpec::new(format!("a{i}"), model.clone()))
                })
                .await,
            );
            samples[2].push(ractor_actors(n).await);
            samples[3].push(kameo_actors(n).await);
        }
    });
    println!("spawn and idle memory, {n} agents each, median of {rounds} rounds:");
    println!("| agent | spawn {n} (ms) | per agent (µs) | heap per idle agent (KiB) |");
    println!("| --- | --- | --- | --- |");
    for (kind, samples) in kinds.iter().zip(&samples) {
        let spawn = median(samples.iter().map(|s| s.spawn.as_secs_f64()).collect());
        let heap = median(samples.iter().map(|s| s.heap).collect());
        println!(
            "| {kind} | {:.1} | {:.2} | {:.2} |",
            spawn * 1e3,
            spawn * 1e6 / n as f64,
            heap / 1024.0
        );
    }
}
