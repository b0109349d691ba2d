//! [`Team`]: the handle a program holds on a supervisor and its agents.

use std::any::Any;
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::approval::{ApprovalError, Approvals};
use crate::event_bus::EventBus;
use crate::supervisor::actor::{AgentMsg, CheckpointStore};
use crate::supervisor::behavior::{AgentBehavior, AgentRequest, BehaviorFactory, Checkpoint};
use crate::supervisor::directory::{AskError, Directory};
use crate::supervisor::supervisor::{
    RestartPolicy, SpawnError, Supervisor, SupervisorArgs, SupervisorMsg,
};
use crate::typed::{self, TypedAnswerError};
use troupe_protocol::EventRecord;
use troupe_protocol::ResponseFormat;
use troupe_protocol::{ApprovalDecision, ApprovalId};

/// Answers a typed ask takes at most: the first, and one after the model saw its error.
const TYPED_ATTEMPTS: u32 = 2;

/// How a team is run.
#[derive(Debug, Clone)]
pub struct TeamConfig {
    /// When failing agents are restarted, and when the supervisor gives up.
    pub restart: RestartPolicy,
    /// Default timeout of [`Team::ask`].
    pub ask_timeout: Duration,
    /// How long shutdown waits for an agent to finish its current request before killing it.
    pub shutdown_grace: Duration,
    /// Events buffered per subscriber before a slow one starts losing the oldest.
    pub event_capacity: usize,
}

impl Default for TeamConfig {
    fn default() -> Self {
        TeamConfig {
            restart: RestartPolicy::default(),
            ask_timeout: Duration::from_secs(300),
            shutdown_grace: Duration::from_secs(10),
            event_capacity: 4096,
        }
    }
}

/// Why a team operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TeamError {
    /// The supervisor could not be started.
    #[error("the supervisor could not be started: {0}")]
    Start(String),
    /// An agent could not be spawned.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
}

/// A running team: one supervisor, its agents, their directory and event bus.
///
/// ```no_run
/// # async fn demo(factory: troupe_runtime::BehaviorFactory) -> Result<(), Box<dyn std::error::Error>> {
/// use troupe_runtime::{Team, TeamConfig};
/// let team = Team::start(TeamConfig::default()).await?;
/// team.spawn("worker", factory).await?;
/// let answer = team.ask("worker", "what is 2 + 2?").await?;
/// println!("{answer}");
/// team.shutdown().await;
/// # Ok(()) }
/// ```
pub struct Team {
    supervisor: ActorRef<SupervisorMsg>,
    supervisor_task: JoinHandle<()>,
    directory: Directory,
    events: EventBus,
    approvals: Approvals,
    checkpoints: CheckpointStore,
    config: TeamConfig,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("agents", &self.directory.names())
            .finish()
    }
}

impl Team {
    /// Start a supervisor with no agents yet.
    pub async fn start(config: TeamConfig) -> Result<Team, TeamError> {
        Self::start_with_bus(config.clone(), EventBus::new(config.event_capacity)).await
    }

    /// Start a supervisor that publishes on an existing event bus.
    pub async fn start_with_bus(config: TeamConfig, events: EventBus) -> Result<Team, TeamError> {
        let directory = Directory::default();
        let checkpoints = CheckpointStore::default();
        let approvals = Approvals::default();
        let args = SupervisorArgs {
            directory: directory.clone(),
            events: events.clone(),
            approvals: approvals.clone(),
            checkpoints: checkpoints.clone(),
            policy: config.restart,
            shutdown_grace: config.shutdown_grace,
        };
        let (supervisor, supervisor_task) = Actor::spawn(None, Supervisor, args)
            .await
            .map_err(|e| TeamError::Start(e.to_string()))?;
        Ok(Team {
            supervisor,
            supervisor_task,
            directory,
            events,
            approvals,
            checkpoints,
            config,
        })
    }

    /// Spawn an agent under the supervisor. Its name must be unique in the team.
    pub async fn spawn(
        &self,
        name: impl Into<String>,
        factory: BehaviorFactory,
    ) -> Result<(), TeamError> {
        self.spawner().spawn(name, factory).await
    }

    /// Spawn many agents in one supervisor message — for large teams, much cheaper than one
    /// [`Team::spawn`] each. Returns one result per agent, in order; an agent that cannot be
    /// spawned (bad or duplicate name, failing factory) does not stop the others.
    ///
    /// # Errors
    /// [`SpawnError::ShutDown`] when the supervisor is gone (then no agent was spawned).
    pub async fn spawn_many(
        &self,
        agents: impl IntoIterator<Item = (String, BehaviorFactory)>,
    ) -> Result<Vec<Result<(), SpawnError>>, TeamError> {
        self.spawner().spawn_many(agents).await
    }

    /// [`Team::spawn`] and [`TeamSpawner::retire`] as a handle a server can keep beyond a
    /// borrow of the team (troupe-a2a's agents per conversation): it holds the supervisor's
    /// address, not the supervisor, so the team's owner still shuts it down, after which its
    /// spawns fail with [`SpawnError::ShutDown`].
    pub fn spawner(&self) -> TeamSpawner {
        TeamSpawner {
            supervisor: self.supervisor.clone(),
            directory: self.directory.clone(),
        }
    }

    /// Ask an agent and wait for its answer (default timeout from [`TeamConfig::ask_timeout`]).
    pub async fn ask(&self, name: &str, text: impl Into<String>) -> Result<String, AskError> {
        self.directory
            .ask(name, AgentRequest::from_user(text), self.config.ask_timeout)
            .await
    }

    /// Ask an agent for a value of type `T` instead of text: the request carries `T`'s JSON
    /// Schema ([`ResponseFormat::of`](troupe_protocol::ResponseFormat::of)) to every model call it
    /// makes, and the answer is parsed into `T` and checked against the schema's rules. An
    /// answer that does not parse, or breaks a rule, is answered once with the error, in the
    /// same conversation, and the agent asked again.
    ///
    /// # Errors
    /// [`TypedAnswerError::Ask`] when an ask fails, [`TypedAnswerError::Mismatch`] naming the
    /// field (and the rule) when the second answer is not a `T` either,
    /// [`TypedAnswerError::Schema`] when `T`'s schema cannot be compiled for checking.
    pub async fn ask_typed<T>(
        &self,
        name: &str,
        text: impl Into<String>,
    ) -> Result<T, TypedAnswerError>
    where
        T: serde::de::DeserializeOwned + schemars::JsonSchema,
    {
        let format = ResponseFormat::of::<T>();
        let mut request = AgentRequest {
            response_format: Some(format.clone()),
            ..AgentRequest::from_user(text)
        };
        let mut attempts_left = TYPED_ATTEMPTS;
        loop {
            let trace = request.trace;
            let answer = self
                .ask_with(name, request, self.config.ask_timeout)
                .await?;
            let error = match typed::parse_answer::<T>(&answer, &format) {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            attempts_left -= 1;
            let TypedAnswerError::Mismatch { field, message, .. } = &error else {
                return Err(error);
            };
            if attempts_left == 0 {
                return Err(error);
            }
            // The correction continues the same trace: one typed ask is one request to watch.
            request = AgentRequest {
                from: None,
                text: typed::correction(&format, field, message),
                trace: trace.child(),
                response_format: Some(format.clone()),
                request_id: None,
            };
        }
    }

    /// Ask with an explicit request (sender, trace) and timeout.
    pub async fn ask_with(
        &self,
        name: &str,
        request: AgentRequest,
        timeout: Duration,
    ) -> Result<String, AskError> {
        self.directory.ask(name, request, timeout).await
    }

    /// Ask an agent and watch the request as it happens: the returned stream yields every event
    /// of the request — [`Event::ModelDelta`](troupe_protocol::Event::ModelDelta)s as the model generates
    /// text, tool calls, compactions, in the asked agent and in any agent it asks in turn — and
    /// ends with [`AskItem::Answer`](crate::AskItem::Answer) or the [`AskError`].
    ///
    /// Dropping the stream cancels the request: the agents working for it stop and roll their
    /// conversations back to where the request found them. A reader slower than the model holds
    /// at most [`DELTA_ROOM`](crate::DELTA_ROOM) unread deltas; the model then waits for it.
    pub fn ask_stream(&self, name: &str, text: impl Into<String>) -> crate::AskStream {
        self.ask_stream_with(name, AgentRequest::from_user(text))
    }

    /// [`ask_stream`](Self::ask_stream) with an explicit request (sender, trace): a request that
    /// came from elsewhere (an A2A caller's `traceparent`) keeps the trace it arrived in.
    pub fn ask_stream_with(&self, name: &str, request: AgentRequest) -> crate::AskStream {
        (self.stream_asker())(name, request)
    }

    /// [`ask_stream_with`](Self::ask_stream_with) as a function a server can keep beyond a borrow
    /// of the team (troupe-a2a's): it holds the directory and the bus, not the supervisor, so the
    /// team's owner still shuts it down, after which its asks fail with [`AskError::ShutDown`].
    pub fn stream_asker(
        &self,
    ) -> impl Fn(&str, AgentRequest) -> crate::AskStream + Clone + Send + Sync + 'static {
        let directory = self.directory.clone();
        let events = self.events.clone();
        let timeout = self.config.ask_timeout;
        move |name: &str, request: AgentRequest| {
            let watched = events.watch(request.trace.id());
            let finish = watched.finisher();
            let directory = directory.clone();
            let name = name.to_string();
            tokio::spawn(async move {
                let answer = directory.ask(&name, request, timeout).await;
                finish(answer.map(crate::AskItem::Answer));
            });
            crate::AskStream::new(watched)
        }
    }

    /// Send an agent a request without waiting for the answer.
    pub async fn send(&self, name: &str, text: impl Into<String>) -> Result<(), AskError> {
        self.directory
            .send(name, AgentRequest::from_user(text))
            .await
    }

    /// Run `f` on an agent's behaviour, typed as `B`, between two of its requests.
    ///
    /// Returns `None` if the agent's behaviour is not a `B`.
    pub async fn with_agent<B, R, F>(&self, name: &str, f: F) -> Result<Option<R>, AskError>
    where
        B: AgentBehavior,
        R: Send + 'static,
        F: FnOnce(&mut B) -> R + Send + 'static,
    {
        let actor = self.directory.resolve(name)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let apply = move |behavior: &mut dyn AgentBehavior| {
            let out = (behavior as &mut dyn Any).downcast_mut::<B>().map(f);
            let _ = tx.send(out);
        };
        actor
            .cast(AgentMsg::Apply(Box::new(apply)))
            .map_err(|_| AskError::AgentFailed {
                name: name.to_string(),
                reason: "its mailbox is closed".into(),
            })?;
        rx.await.map_err(|_| AskError::AgentFailed {
            name: name.to_string(),
            reason: "it stopped".into(),
        })
    }

    /// Whether the agent is handling a text request right now.
    pub fn is_responding(&self, name: &str) -> bool {
        self.directory.is_responding(name)
    }

    /// The agent's last checkpoint (its conversation as of its last completed request).
    pub fn checkpoint(&self, name: &str) -> Option<Checkpoint> {
        self.checkpoints.get(name)
    }

    /// A new subscriber to the team's events.
    pub fn subscribe(&self) -> broadcast::Receiver<EventRecord> {
        self.events.subscribe()
    }

    /// The team's event bus.
    pub fn events(&self) -> &EventBus {
        &self.events
    }

    /// The team's directory (give it to code that must reach agents by name).
    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// The team's open tool-approval requests (see [`Event::ApprovalRequested`](troupe_protocol::Event)).
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// Run the tool call waiting under `id` as the model wrote it.
    ///
    /// # Errors
    /// [`ApprovalError::Unknown`] when nothing waits under `id`.
    pub fn approve(&self, id: &ApprovalId) -> Result<(), ApprovalError> {
        self.approvals
            .decide(id, ApprovalDecision::Approve { arguments: None })
    }

    /// Run the tool call waiting under `id` with these arguments (a JSON object) instead.
    ///
    /// # Errors
    /// [`ApprovalError::Unknown`] when nothing waits under `id`,
    /// [`ApprovalError::InvalidArguments`] when `arguments` is not a JSON object (the call
    /// still waits).
    pub fn approve_with(
        &self,
        id: &ApprovalId,
        arguments: impl Into<String>,
    ) -> Result<(), ApprovalError> {
        let arguments = Some(arguments.into());
        self.approvals
            .decide(id, ApprovalDecision::Approve { arguments })
    }

    /// Do not run the tool call waiting under `id`; the model sees `reason` as its result.
    ///
    /// # Errors
    /// [`ApprovalError::Unknown`] when nothing waits under `id`.
    pub fn deny(&self, id: &ApprovalId, reason: impl Into<String>) -> Result<(), ApprovalError> {
        let reason = reason.into();
        self.approvals.decide(id, ApprovalDecision::Deny { reason })
    }

    /// Stop every agent (each finishes its current request, within the grace period), then the
    /// supervisor. Requests still queued are answered with [`AskError::ShutDown`] or dropped.
    pub async fn shutdown(self) {
        let _ = self.supervisor.call(SupervisorMsg::StopAll, None).await;
        self.supervisor.stop(Some("team shutdown".into()));
        let _ = self.supervisor_task.await;
    }
}

/// Spawns and retires agents of a team without a borrow of it ([`Team::spawner`]).
#[derive(Clone)]
pub struct TeamSpawner {
    supervisor: ActorRef<SupervisorMsg>,
    directory: Directory,
}

impl std::fmt::Debug for TeamSpawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamSpawner").finish_non_exhaustive()
    }
}

impl TeamSpawner {
    /// The team's directory.
    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// [`Team::spawn`].
    ///
    /// # Errors
    /// As [`Team::spawn`].
    pub async fn spawn(
        &self,
        name: impl Into<String>,
        factory: BehaviorFactory,
    ) -> Result<(), TeamError> {
        let result = self.spawn_many([(name.into(), factory)]).await?.pop();
        result
            .unwrap_or(Err(SpawnError::ShutDown))
            .map_err(TeamError::from)
    }

    /// Spawn many agents in one supervisor message — for large teams, much cheaper than one
    /// [`Team::spawn`] each. Returns one result per agent, in order; an agent that cannot be
    /// spawned (bad or duplicate name, failing factory) does not stop the others.
    ///
    /// # Errors
    /// [`SpawnError::ShutDown`] when the supervisor is gone (then no agent was spawned).
    pub async fn spawn_many(
        &self,
        agents: impl IntoIterator<Item = (String, BehaviorFactory)>,
    ) -> Result<Vec<Result<(), SpawnError>>, TeamError> {
        let mut results: Vec<Option<Result<(), SpawnError>>> = Vec::new();
        let mut valid = Vec::new();
        for (name, factory) in agents {
            let checked =
                check_name(&name).and_then(|()| match self.directory.remote_node_of(&name) {
                    Some(node) => Err(SpawnError::NameTakenOnNode {
                        name: name.clone(),
                        node,
                    }),
                    None => Ok(()),
                });
            match checked {
                Ok(()) => {
                    results.push(None);
                    valid.push((name, factory));
                }
                Err(e) => results.push(Some(Err(e))),
            }
        }
        let reply = self
            .supervisor
            .call(
                |reply| SupervisorMsg::SpawnMany {
                    agents: valid,
                    reply,
                },
                None,
            )
            .await;
        let Ok(CallResult::Success(spawned)) = reply else {
            return Err(SpawnError::ShutDown.into());
        };
        let mut spawned = spawned.into_iter();
        Ok(results
            .into_iter()
            .map(|r| match r {
                Some(invalid) => invalid,
                None => spawned.next().unwrap_or(Err(SpawnError::ShutDown)),
            })
            .collect())
    }

    /// Stop agent `name` for good, as a team shutdown stops it (it finishes the request it is
    /// handling, within the shutdown grace, and ends the work it runs outside requests), and
    /// forget it: its name is free again and its checkpoint is dropped — a later agent of that
    /// name starts from what its factory builds. Answers whether the team had it.
    ///
    /// # Errors
    /// [`SpawnError::ShutDown`] when the supervisor is gone.
    pub async fn retire(&self, name: &str) -> Result<bool, TeamError> {
        let name = name.to_string();
        let reply = self
            .supervisor
            .call(|reply| SupervisorMsg::Retire { name, reply }, None)
            .await;
        match reply {
            Ok(CallResult::Success(had)) => Ok(had),
            _ => Err(SpawnError::ShutDown.into()),
        }
    }
}

/// Names are what a directory addresses: non-empty, letters, digits, `-`, `_`, `.`.
fn check_name(name: &str) -> Result<(), SpawnError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || "-_.".contains(c))
    {
        return Err(SpawnError::InvalidName(name.to_string()));
    }
    Ok(())
}
