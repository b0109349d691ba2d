//! One agent turn (user message → tool call → tool result → final answer, over an in-process
//! scripted model) in troupe, rig and a hand-written ractor actor: one criterion group per
//! runtime, so the three are measured in the same process, one after another, on the same
//! runtime — `turn` on tokio's multi-threaded runtime, `turn_current_thread` on one thread.
//!
//! Run: `cd benches/peers && CARGO_TARGET_DIR=../../target/peers cargo bench --bench turn`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use troupe_peers_bench::{
    FINAL_ANSWER, USER_MESSAGE, ractor_turn, rig_turn, troupe_turn::TroupeTurn,
};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn turn(c: &mut Criterion) {
    turn_on(c, "turn", &runtime());
    // Everything on one thread: no wake-up crosses threads, so the times are the CPU work of a
    // turn alone. On the multi-threaded runtime the hand-written loop's few microseconds move
    // 3× between runs with the scheduler's wake-ups; here they do not.
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    turn_on(c, "turn_current_thread", &single);
}

fn turn_on(c: &mut Criterion, group: &str, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group(group);
    group.measurement_time(Duration::from_secs(8));

    // Every measured iteration asks once and waits for the answer; the untimed work between
    // iterations (scripting the model, emptying troupe's conversation) is outside the clock.
    group.bench_function("troupe", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let agent = TroupeTurn::start().await;
                agent.script(iters);
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let answer = agent.turn().await;
                    total += start.elapsed();
                    assert_eq!(black_box(answer), FINAL_ANSWER);
                    agent.reset().await;
                }
                agent.shutdown().await;
                total
            })
        })
    });

    group.bench_function("rig", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let agent = rig_turn::agent(iters);
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let answer = rig_turn::turn(&agent).await;
                    total += start.elapsed();
                    assert_eq!(black_box(answer), FINAL_ANSWER);
                }
                total
            })
        })
    });

    group.bench_function("ractor", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let agent = ractor_turn::spawn().await;
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let answer = ractor_turn::turn(&agent, USER_MESSAGE).await;
                    total += start.elapsed();
                    assert_eq!(black_box(answer), FINAL_ANSWER);
                }
                agent.stop(None);
                total
            })
        })
    });
    group.finish();
}

/// The message round trip alone, no model and no tool: `Team::ask` to an agent that echoes,
/// against a ractor `call` to an actor that echoes — how much of troupe's turn is its mailbox,
/// directory and reply path rather than the turn loop.
fn round_trip(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("round_trip");
    group.measurement_time(Duration::from_secs(5));
    let team = rt.block_on(echo::team());
    group.bench_function("troupe_echo", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(team.ask("echo", USER_MESSAGE).await.expect("an answer"));
                }
                start.elapsed()
            })
        })
    });
    let actor = rt.block_on(echo::ractor_echo());
    group.bench_function("ractor_echo", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let text = USER_MESSAGE.to_string();
                    black_box(ractor::call!(actor, echo::EchoMsg, text).expect("an answer"));
                }
                start.elapsed()
            })
        })
    });
    group.finish();
    actor.stop(None);
    rt.block_on(team.shutdown());
}

/// The echoing agents of [`round_trip`].
mod echo {
    use std::sync::Arc;

    use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
    use troupe_runtime::{
        AgentBehavior, AgentContext, AgentError, AgentRequest, Checkpoint, Team, TeamConfig,
    };

    /// Answers with the request's text, keeps nothing.
    struct Echo;

    #[async_trait::async_trait]
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

    /// A team with one echoing agent named `echo`.
    pub async fn team() -> Team {
        let team = Team::start(TeamConfig::default()).await.expect("a team");
        team.spawn(
            "echo",
            Arc::new(|_| Ok(Box::new(Echo) as Box<dyn AgentBehavior>)),
        )
        .await
        .expect("spawned");
        team
    }

    /// The ractor echo actor's message: text and where to send it back.
    pub struct EchoMsg(pub String, pub RpcReplyPort<String>);

    impl ractor::Message for EchoMsg {}

    struct EchoActor;

    impl Actor for EchoActor {
        type Msg = EchoMsg;
        type State = ();
        type Arguments = ();

        async fn pre_start(
            &self,
            _myself: ActorRef<EchoMsg>,
            _args: (),
        ) -> Result<(), ActorProcessingErr> {
            Ok(())
        }

        async fn handle(
            &self,
            _myself: ActorRef<EchoMsg>,
            EchoMsg(text, reply): EchoMsg,
            _state: &mut (),
        ) -> Result<(), ActorProcessingErr> {
            let _ = reply.send(text);
            Ok(())
        }
    }

    /// Spawn the ractor echo actor.
    pub async fn ractor_echo() -> ActorRef<EchoMsg> {
        Actor::spawn(None, EchoActor, ()).await.expect("spawned").0
    }
}

criterion_group!(benches, turn, round_trip);
criterion_main!(benches);
