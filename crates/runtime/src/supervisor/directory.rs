//! The team's address book: agents find each other by name.
//!
//! Each team has its own directory (not ractor's process-global registry), so several teams —
//! and parallel tests — can use the same agent names without colliding.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ractor::ActorRef;
use ractor::rpc::CallResult;
use tokio::sync::Notify;

use crate::supervisor::actor::AgentMsg;
use crate::supervisor::behavior::{AgentError, AgentRequest};
use crate::supervisor::job::{JobRequest, Reply};
use crate::supervisor::remote::RemoteAgents;
use troupe_protocol::TraceContext;

/// How long `ask` waits for the supervisor to settle an agent that just failed.
const FAILURE_SETTLE: Duration = Duration::from_secs(2);

/// Why an `ask` or `send` did not get an answer.
///
/// Serializable: a remote node answers with the same error a local ask would give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum AskError {
    /// No agent of that name was ever spawned in this team.
    #[error("no agent named `{name}` (known agents: {})", known.join(", "))]
    NoSuchAgent {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: Vec<String>,
    },
    /// The agent failed too often and was stopped by its supervisor.
    #[error("agent `{name}` is stopped: {reason}")]
    AgentStopped {
        /// The stopped agent's name.
        name: String,
        /// The supervisor's reason.
        reason: String,
    },
    /// The agent crashed while handling this request.
    #[error("agent `{name}` failed while handling the request: {reason}")]
    AgentFailed {
        /// The failed agent's name.
        name: String,
        /// What the supervisor recorded (panic message or fatal error, and whether it restarted).
        reason: String,
    },
    /// No answer within the timeout (the agent keeps working on it).
    #[error("agent `{name}` did not answer within {timeout:?}")]
    Timeout {
        /// The agent that was asked.
        name: String,
        /// The timeout that elapsed.
        timeout: Duration,
    },
    /// The agent answered with an error.
    #[error("agent `{name}`: {error}")]
    Agent {
        /// The agent that answered.
        name: String,
        /// The error its behaviour returned for this request.
        error: AgentError,
    },
    /// The team is shutting down.
    #[error("the team is shut down")]
    ShutDown,
    /// The node running the agent disconnected (or was never reachable) while the request was
    /// in flight: the request may or may not have been handled there.
    #[error("node `{node}` is down: the request's outcome there is unknown")]
    NodeDown {
        /// The node's name.
        node: String,
    },
    /// The node running the agent refused or could not decode the request (another wire
    /// protocol version, a malformed payload).
    #[error("node `{node}` refused the request: {reason}")]
    Remote {
        /// The node's name.
        node: String,
        /// What the node (or the wire) reported.
        reason: String,
    },
}

#[derive(Clone)]
enum Slot {
    Live(ActorRef<AgentMsg>),
    Stopped(String),
}

#[derive(Default)]
struct Entries {
    slots: HashMap<String, Slot>,
    /// Per agent: how many failures the supervisor has handled, and the last reason.
    failures: HashMap<String, (u64, String)>,
    /// Per agent: set while it handles a text request (kept across restarts).
    responding: HashMap<String, Arc<AtomicBool>>,
    shut_down: bool,
}

impl Entries {
    /// The live actor named `name`, or why there is none.
    fn live(&self, name: &str) -> Result<ActorRef<AgentMsg>, AskError> {
        if self.shut_down {
            return Err(AskError::ShutDown);
        }
        match self.slots.get(name) {
            Some(Slot::Live(actor)) => Ok(actor.clone()),
            Some(Slot::Stopped(reason)) => Err(AskError::AgentStopped {
                name: name.to_string(),
                reason: reason.clone(),
            }),
            None => {
                let mut known: Vec<String> = self.slots.keys().cloned().collect();
                known.sort();
                Err(AskError::NoSuchAgent {
                    name: name.to_string(),
                    known,
                })
            }
        }
    }
}

/// A cheap-to-clone handle on the team's agents by name.
#[derive(Clone, Default)]
pub struct Directory {
    entries: Arc<RwLock<Entries>>,
    changed: Arc<Notify>,
    /// Agents on other nodes, once this team joined a cluster (see [`Directory::set_remote`]).
    remote: Arc<std::sync::OnceLock<Arc<dyn RemoteAgents>>>,
    extensions: Arc<std::sync::Mutex<HashMap<std::any::TypeId, Arc<dyn Any + Send + Sync>>>>,
}

impl fmt::Debug for Directory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Directory")
            .field("agents", &self.names())
            .finish()
    }
}

impl Directory {
    fn read<T>(&self, f: impl FnOnce(&Entries) -> T) -> T {
        f(&troupe_protocol::sync::read(&self.entries))
    }

    fn write<T>(&self, f: impl FnOnce(&mut Entries) -> T) -> T {
        let out = f(&mut troupe_protocol::sync::write(&self.entries));
        self.changed.notify_waiters();
        out
    }

    /// The names of all agents, live or stopped, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names = self.read(|e| e.slots.keys().cloned().collect::<Vec<_>>());
        names.sort();
        names
    }

    /// Whether `name` is a live agent.
    pub fn is_live(&self, name: &str) -> bool {
        self.read(|e| matches!(e.slots.get(name), Some(Slot::Live(_))))
    }

    /// The team-wide service of type `T`, created with `init` on first use.
    ///
    /// Teams use this for shared coordination state (e.g. which compactions are in flight)
    /// without the runtime knowing the types.
    pub fn extension<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let mut map = troupe_protocol::sync::lock(&self.extensions);
        let key = std::any::TypeId::of::<T>();
        if let Some(existing) = map.get(&key).cloned()
            && let Ok(typed) = existing.downcast::<T>()
        {
            return typed;
        }
        let fresh = Arc::new(init());
        map.insert(key, fresh.clone());
        fresh
    }

    /// Whether `name` is handling a text request right now (`false` for unknown names).
    pub fn is_responding(&self, name: &str) -> bool {
        self.read(|e| {
            e.responding
                .get(name)
                .is_some_and(|f| f.load(Ordering::SeqCst))
        })
    }

    pub(crate) fn responding_flag(&self, name: &str) -> Arc<AtomicBool> {
        self.write(|e| e.responding.entry(name.to_string()).or_default().clone())
    }

    pub(crate) fn set_live(&self, name: &str, actor: ActorRef<AgentMsg>) {
        self.write(|e| e.slots.insert(name.to_string(), Slot::Live(actor)));
    }

    pub(crate) fn set_stopped(&self, name: &str, reason: String) {
        self.write(|e| e.slots.insert(name.to_string(), Slot::Stopped(reason)));
    }

    /// Forget a retired agent: its name is free again, and nothing about it is kept.
    pub(crate) fn forget(&self, name: &str) {
        self.write(|e| {
            e.slots.remove(name);
            e.failures.remove(name);
            e.responding.remove(name);
        });
    }

    pub(crate) fn record_failure(&self, name: &str, reason: String) {
        self.write(|e| {
            let entry = e
                .failures
                .entry(name.to_string())
                .or_insert((0, String::new()));
            entry.0 += 1;
            entry.1 = reason;
        });
    }

    pub(crate) fn mark_shut_down(&self) {
        self.write(|e| e.shut_down = true);
    }

    pub(crate) fn resolve(&self, name: &str) -> Result<ActorRef<AgentMsg>, AskError> {
        self.read(|e| e.live(name))
    }

    /// `name`'s actor and how many of its failures the supervisor has handled, read together
    /// (one lock per ask): a reply port that drops later is a new failure only if the count grew.
    fn resolve_counted(&self, name: &str) -> Result<(ActorRef<AgentMsg>, u64), AskError> {
        self.read(|e| Ok((e.live(name)?, e.failures.get(name).map_or(0, |f| f.0))))
    }

    /// Reach agents on other nodes through `remote`: a name no local agent has is looked up
    /// there. Set once, when the team joins a cluster; returns `false` if one was already set.
    pub fn set_remote(&self, remote: Arc<dyn RemoteAgents>) -> bool {
        self.remote.set(remote).is_ok()
    }

    /// Whether this team has joined a cluster (see [`Directory::set_remote`]).
    pub fn in_cluster(&self) -> bool {
        self.remote.get().is_some()
    }

    /// The node running `name` when another node of the cluster does and no local agent has
    /// that name.
    pub fn remote_node_of(&self, name: &str) -> Option<String> {
        self.remote_for(name).and_then(|remote| remote.locate(name))
    }

    /// Where a request for `name` goes when it does not stay here: local agents (live or
    /// stopped) come first.
    pub(crate) fn remote_for(&self, name: &str) -> Option<&Arc<dyn RemoteAgents>> {
        let remote = self.remote.get()?;
        if self.read(|e| e.slots.contains_key(name)) || remote.locate(name).is_none() {
            return None;
        }
        Some(remote)
    }

    /// Ask `name` and wait up to `timeout` for its answer.
    ///
    /// If the agent crashes on this request the error names the failure; if it is being
    /// restarted the next `ask` reaches the restarted agent. A name no local agent has goes to
    /// the cluster, if the team joined one, and follows the agent to its new home when its node
    /// goes away and the cluster sets a failover wait (`failover.rs`).
    pub async fn ask(
        &self,
        name: &str,
        request: AgentRequest,
        timeout: Duration,
    ) -> Result<String, AskError> {
        if let Some(remote) = self.remote_for(name) {
            return self.ask_remote(remote, name, request, timeout).await;
        }
        self.ask_here(name, request, timeout).await
    }

    /// Ask the local agent `name`.
    pub(super) async fn ask_here(
        &self,
        name: &str,
        request: AgentRequest,
        timeout: Duration,
    ) -> Result<String, AskError> {
        self.call(name, timeout, |reply| AgentMsg::Request {
            request,
            reply: Some(reply),
        })
        .await
    }

    /// Give `name` a typed job and wait up to `timeout` for its answer, ractor's way: `job`
    /// builds the variant of the agent's job enum around a fresh answer port,
    /// `|reply| SomeJob::Variant(args, reply)`, and the answer is what the behaviour sends on it.
    ///
    /// The spans the job opens are children of the caller's current span (one trace from the
    /// request that caused the job to the work it does); `trace` is the request's context, for
    /// the job's events.
    ///
    /// # Errors
    /// Every [`AskError`] of [`Directory::ask`]; [`AskError::Agent`] with the error the
    /// behaviour returned (a refusal naming the job type when the agent does not take `J`), or
    /// with a failure saying the job ended without an answer when its port was dropped.
    pub async fn ask_job<J: Send + 'static, T: Send + 'static>(
        &self,
        name: &str,
        job: impl FnOnce(Reply<T>) -> J,
        trace: TraceContext,
        timeout: Duration,
    ) -> Result<T, AskError> {
        let span = tracing::Span::current();
        let (reply, answer) = Reply::channel();
        let job = JobRequest::new(job(reply), trace);
        let job_type = job.job_type();
        let started = tokio::time::Instant::now();
        self.call(name, timeout, |reply| AgentMsg::Job { job, span, reply })
            .await?;
        // Answered already, unless the behaviour handed the port on: then the rest of the
        // timeout is the answer's.
        let left = timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, answer.received()).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(AskError::Agent {
                name: name.to_string(),
                error: AgentError::Failed(format!(
                    "the agent ended a {job_type} without answering it"
                )),
            }),
            Err(_) => Err(AskError::Timeout {
                name: name.to_string(),
                timeout,
            }),
        }
    }

    /// One request/reply round trip with `name`, mapping every way it can end to an [`AskError`].
    async fn call<T: Send + 'static>(
        &self,
        name: &str,
        timeout: Duration,
        message: impl FnOnce(ractor::RpcReplyPort<Result<T, AgentError>>) -> AgentMsg,
    ) -> Result<T, AskError> {
        let (actor, failures_before) = self.resolve_settled(name).await?;
        match actor.call(message, Some(timeout)).await {
            Ok(CallResult::Success(Ok(answer))) => Ok(answer),
            Ok(CallResult::Success(Err(error))) => Err(AskError::Agent {
                name: name.to_string(),
                error,
            }),
            Ok(CallResult::Timeout) => Err(AskError::Timeout {
                name: name.to_string(),
                timeout,
            }),
            // Boxed: the rare path's timer stays out of every ask's future.
            Ok(CallResult::SenderError) | Err(_) => {
                Err(Box::pin(self.failure_after(name, failures_before)).await)
            }
        }
    }

    /// Send `name` a request without waiting for the answer (fire and forget).
    pub async fn send(&self, name: &str, request: AgentRequest) -> Result<(), AskError> {
        if let Some(remote) = self.remote_for(name) {
            return remote.send(name, request).await;
        }
        let (actor, _) = self.resolve_settled(name).await?;
        actor
            .cast(AgentMsg::Request {
                request,
                reply: None,
            })
            .map_err(|_| AskError::AgentFailed {
                name: name.to_string(),
                reason: "its mailbox is closed".into(),
            })
    }

    /// Resolve a name (with its failure count, see [`Directory::resolve_counted`]); if its actor
    /// is dead but the supervisor has not yet replaced it, wait briefly for the restart instead
    /// of failing a request that could succeed.
    async fn resolve_settled(&self, name: &str) -> Result<(ActorRef<AgentMsg>, u64), AskError> {
        // A running agent, the common case, costs one lookup and no clock read; the wait is
        // boxed so that its timer does not enlarge (and get copied with) every ask's future.
        let resolved = self.resolve_counted(name)?;
        if is_running(&resolved.0) {
            return Ok(resolved);
        }
        Box::pin(self.wait_until_settled(name)).await
    }

    /// [`Directory::resolve_settled`]'s slow path: wait for the supervisor to replace a dead
    /// actor, up to [`FAILURE_SETTLE`].
    async fn wait_until_settled(&self, name: &str) -> Result<(ActorRef<AgentMsg>, u64), AskError> {
        let deadline = tokio::time::Instant::now() + FAILURE_SETTLE;
        loop {
            let notified = self.changed.notified();
            let resolved = self.resolve_counted(name)?;
            if is_running(&resolved.0) || tokio::time::Instant::now() >= deadline {
                return Ok(resolved);
            }
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }

    /// The error for a request whose reply port was dropped: the agent crashed. Waits for the
    /// supervisor to record the failure so the caller learns why and what happened next.
    async fn failure_after(&self, name: &str, failures_before: u64) -> AskError {
        let deadline = tokio::time::Instant::now() + FAILURE_SETTLE;
        loop {
            let notified = self.changed.notified();
            let recorded = self.read(|e| {
                e.failures
                    .get(name)
                    .filter(|f| f.0 > failures_before)
                    .map(|f| f.1.clone())
            });
            if let Some(reason) = recorded {
                return AskError::AgentFailed {
                    name: name.to_string(),
                    reason,
                };
            }
            if self.read(|e| e.shut_down) {
                return AskError::ShutDown;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return AskError::AgentFailed {
                    name: name.to_string(),
                    reason: "it stopped without a reply".into(),
                };
            }
        }
    }
}

fn is_running(actor: &ActorRef<AgentMsg>) -> bool {
    matches!(
        actor.get_status(),
        ractor::ActorStatus::Running
            | ractor::ActorStatus::Starting
            | ractor::ActorStatus::Upgrading
    )
}
