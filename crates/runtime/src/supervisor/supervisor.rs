//! The supervisor actor: spawns agents as linked children and restarts the ones that fail.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::event_bus::EventBus;
use crate::supervisor::actor::{AgentActor, AgentActorArgs, CheckpointStore};
use crate::supervisor::behavior::{AgentContext, BehaviorFactory, Checkpoint};
use crate::supervisor::directory::Directory;
use troupe_protocol::Event;
use troupe_protocol::trace::semconv;

/// How often a failing agent is restarted before the supervisor gives up on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed within `window`; one more failure stops the agent for good.
    pub max_restarts: u32,
    /// The sliding window the restarts are counted in.
    pub window: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_restarts: 3,
            window: Duration::from_secs(60),
        }
    }
}

/// Why an agent could not be spawned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The name is taken in this team.
    #[error("an agent named `{0}` already exists in this team")]
    DuplicateName(String),
    /// Names must be non-empty and made of letters, digits, `-`, `_` and `.`.
    #[error("invalid agent name `{0}`: use letters, digits, '-', '_' or '.'")]
    InvalidName(String),
    /// The behaviour factory failed.
    #[error("agent `{name}` could not be built: {reason}")]
    Build {
        /// The name the agent was to have.
        name: String,
        /// The factory's error, as text.
        reason: String,
    },
    /// The actor system refused to start it.
    #[error("agent `{name}` could not be started: {reason}")]
    Actor {
        /// The name the agent was to have.
        name: String,
        /// ractor's spawn error, as text.
        reason: String,
    },
    /// Another node of the cluster already runs an agent of that name (names are unique across
    /// the cluster, so that asking a name reaches one agent).
    #[error("an agent named `{name}` already runs on node `{node}`")]
    NameTakenOnNode {
        /// The name asked for.
        name: String,
        /// The node that holds it.
        node: String,
    },
    /// The supervisor is gone.
    #[error("the team is shut down")]
    ShutDown,
}

pub(crate) enum SupervisorMsg {
    /// Spawn agents (one mailbox round trip for all of them); one result per agent, in order.
    SpawnMany {
        agents: Vec<(String, BehaviorFactory)>,
        reply: RpcReplyPort<Vec<Result<(), SpawnError>>>,
    },
    StopAll(RpcReplyPort<()>),
    /// Stop one agent for good and forget it (its name, checkpoint and failures), as a team
    /// shutdown stops each agent; answers whether the team had it.
    Retire {
        name: String,
        reply: RpcReplyPort<bool>,
    },
}

// In-process only: the default `serializable() == false` keeps it off the wire.
impl ractor::Message for SupervisorMsg {}

struct Child {
    factory: BehaviorFactory,
    actor: ActorRef<crate::supervisor::actor::AgentMsg>,
    failures: VecDeque<Instant>,
    /// When it was spawned, counted in spawns (a restart keeps it): shutdown goes in reverse.
    spawned: u64,
}

pub(crate) struct SupervisorArgs {
    pub(crate) directory: Directory,
    pub(crate) events: EventBus,
    pub(crate) approvals: crate::approval::Approvals,
    pub(crate) checkpoints: CheckpointStore,
    pub(crate) policy: RestartPolicy,
    pub(crate) shutdown_grace: Duration,
}

pub(crate) struct SupervisorState {
    args: SupervisorArgs,
    children: HashMap<String, Child>,
    by_id: HashMap<ActorId, String>,
    stopping: bool,
    /// Agents spawned so far (each child's `spawned`).
    spawns: u64,
}

pub(crate) struct Supervisor;

impl Supervisor {
    async fn start_child(
        myself: &ActorRef<SupervisorMsg>,
        state: &SupervisorState,
        name: &str,
        factory: &BehaviorFactory,
        checkpoint: Option<Checkpoint>,
    ) -> Result<ActorRef<crate::supervisor::actor::AgentMsg>, SpawnError> {
        let behavior = factory(checkpoint).map_err(|e| SpawnError::Build {
            name: name.to_string(),
            reason: e.to_string(),
        })?;
        let args = AgentActorArgs {
            ctx: AgentContext {
                name: name.to_string(),
                directory: state.args.directory.clone(),
                events: state.args.events.clone(),
                approvals: state.args.approvals.clone(),
            },
            behavior,
            checkpoints: state.args.checkpoints.clone(),
            responding: state.args.directory.responding_flag(name),
        };
        let (actor, _join) = Actor::spawn_linked(None, AgentActor, args, myself.get_cell())
            .await
            .map_err(|e| SpawnError::Actor {
                name: name.to_string(),
                reason: e.to_string(),
            })?;
        Ok(actor)
    }

    /// Start a new child and register it, unless the team is stopping or the name is taken.
    async fn spawn_one(
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        name: String,
        factory: BehaviorFactory,
    ) -> Result<(), SpawnError> {
        if state.stopping {
            return Err(SpawnError::ShutDown);
        }
        if state.children.contains_key(&name) {
            return Err(SpawnError::DuplicateName(name));
        }
        let actor = Self::start_child(myself, state, &name, &factory, None).await?;
        state.by_id.insert(actor.get_id(), name.clone());
        state.args.directory.set_live(&name, actor.clone());
        state.spawns += 1;
        state.children.insert(
            name,
            Child {
                factory,
                actor,
                failures: VecDeque::new(),
                spawned: state.spawns,
            },
        );
        Ok(())
    }

    async fn on_child_down(
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        id: ActorId,
        reason: String,
    ) {
        let Some(name) = state.by_id.remove(&id) else {
            return;
        };
        if state.stopping {
            return;
        }
        let policy = state.args.policy;
        let Some(child) = state.children.get_mut(&name) else {
            return;
        };
        let now = Instant::now();
        while child
            .failures
            .front()
            .is_some_and(|t| now.duration_since(*t) > policy.window)
        {
            child.failures.pop_front();
        }
        child.failures.push_back(now);
        let count = child.failures.len() as u32;
        let span = tracing::warn_span!(
            "restart",
            { semconv::AGENT_NAME } = %name,
            failures = count,
            { semconv::RESTARTED } = tracing::field::Empty,
        );
        let _entered = span.enter();
        if count > policy.max_restarts {
            let why = format!(
                "failed {count} times within {:?} (limit {} restarts); last failure: {reason}",
                policy.window, policy.max_restarts
            );
            Self::stop_for_good(state, &name, &reason, why);
            return;
        }
        let factory = child.factory.clone();
        let checkpoint = state.args.checkpoints.get(&name);
        match Self::start_child(myself, state, &name, &factory, checkpoint).await {
            Ok(actor) => {
                span.record(semconv::RESTARTED, true);
                tracing::warn!(agent = %name, restarts = count, "restarted after failure: {reason}");
                state.by_id.insert(actor.get_id(), name.clone());
                if let Some(child) = state.children.get_mut(&name) {
                    child.actor = actor.clone();
                }
                state.args.directory.set_live(&name, actor);
                state
                    .args
                    .directory
                    .record_failure(&name, format!("{reason}; agent restarted"));
                state.args.events.publish(
                    None,
                    Event::AgentRestarted {
                        agent: name.clone(),
                        restarts: count,
                        reason,
                    },
                );
            }
            Err(e) => Self::stop_for_good(state, &name, &reason, format!("restart failed: {e}")),
        }
    }

    /// Stop agent `name` for good after `failure`, because of `why` (too many failures, or a
    /// restart that could not build it): every later `ask` gets `AskError::AgentStopped` with
    /// `why`, the caller of the failing request learns it alongside `failure`, and
    /// `Event::AgentStopped` reports it — the failure is reported, not only logged.
    fn stop_for_good(state: &SupervisorState, name: &str, failure: &str, why: String) {
        tracing::error!(agent = %name, "{why}");
        let directory = &state.args.directory;
        directory.set_stopped(name, why.clone());
        directory.record_failure(name, format!("{failure}; agent stopped: {why}"));
        state.args.events.publish(
            None,
            Event::AgentStopped {
                agent: name.to_string(),
                reason: why,
            },
        );
    }
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SupervisorState {
            args,
            children: HashMap::new(),
            by_id: HashMap::new(),
            stopping: false,
            spawns: 0,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::SpawnMany { agents, reply } => {
                let mut results = Vec::with_capacity(agents.len());
                for (name, factory) in agents {
                    results.push(Self::spawn_one(&myself, state, name, factory).await);
                }
                let _ = reply.send(results);
            }
            SupervisorMsg::StopAll(reply) => {
                state.stopping = true;
                state.args.directory.mark_shut_down();
                // Last spawned, first stopped: an agent finishing its last request may still
                // ask one spawned before it (the compression agent, which a team builder
                // spawns first), and that one ends the work it took from it when it stops.
                let mut children: Vec<&Child> = state.children.values().collect();
                children.sort_by_key(|child| std::cmp::Reverse(child.spawned));
                for child in children {
                    // Each agent finishes the request it is handling and ends the work it runs
                    // outside its requests (`AgentBehavior::stop`), then stops; one that does
                    // not within the grace period is killed.
                    let stopped = child
                        .actor
                        .stop_and_wait(
                            Some("team shutdown".into()),
                            Some(state.args.shutdown_grace),
                        )
                        .await;
                    if stopped.is_err() {
                        child.actor.kill();
                    }
                }
                let _ = reply.send(());
            }
            SupervisorMsg::Retire { name, reply } => {
                let Some(child) = state.children.remove(&name) else {
                    let _ = reply.send(false);
                    return Ok(());
                };
                // Forgotten first: its termination is then no failure to restart it for.
                state.by_id.remove(&child.actor.get_id());
                let stopped = child
                    .actor
                    .stop_and_wait(Some("retired".into()), Some(state.args.shutdown_grace))
                    .await;
                if stopped.is_err() {
                    child.actor.kill();
                }
                state.args.directory.forget(&name);
                state.args.checkpoints.forget(&name);
                let _ = reply.send(true);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, err) => {
                Self::on_child_down(&myself, state, cell.get_id(), err.to_string()).await;
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let reason = reason.unwrap_or_else(|| "stopped unexpectedly".into());
                Self::on_child_down(&myself, state, cell.get_id(), reason).await;
            }
            _ => {}
        }
        Ok(())
    }
}
