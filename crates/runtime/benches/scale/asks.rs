//! Many agents asking each other at once: throughput and latency, troupe against raw tokio and
//! raw ractor.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint, Team,
    TeamConfig,
};

use crate::common::raw::{EchoMsg, Ping, RactorEcho, tokio_echo};
use crate::common::{echo_factory, median};
use crate::{WAYS, Way};

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

pub(crate) fn report(rt: &tokio::runtime::Runtime, askers: usize, asks: usize, rounds: usize) {
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
