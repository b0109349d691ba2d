//! One conversation per A2A context: a served LLM agent answers each `contextId` with an agent
//! of its own, built from the served agent's spec (same model, instructions, tools, approval
//! policy, budgets) and spawned into the same team under the same supervisor — so its requests
//! go the team's one road (directory, events, approvals desk, traces) — with its own session log
//! beside the served agent's when that one keeps a log. Caller B's task never sees what caller A
//! told the agent, and a restarted server resumes a context's conversation from its log. A
//! context is its caller's (the key it came with): another caller's context of the same id is
//! another conversation, with another log.
//!
//! Bounded: at most `max_live` such agents run at once. One idle past `idle_after` is retired
//! (stopped and forgotten) when the next context starts; at the cap the least recently used idle
//! one is retired for a new context, and when every one is working the new context is refused.
//! A retired context with a log comes back from it; one without a log has ended, and says so.
//!
//! A served agent that is not an `LlmAgent` (a behaviour troupe cannot build again) is one
//! conversation: it serves the first context it is asked in, and another context (or a send
//! without one) is refused rather than let into that conversation. Sharing is not safe in
//! general: such a behaviour may keep what it was told (an A2A teammate served onward keeps its
//! remote `contextId`, a custom behaviour its own state), and troupe cannot tell one that does
//! not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use troupe_agents::{AgentSpec, LlmAgent};
use troupe_protocol::sync::lock;
use troupe_runtime::TeamSpawner;

use crate::server::context_logs::ContextLogs;

/// The longest `contextId` a served LLM agent takes: its session log is named after it (hex,
/// within a file name's 255 bytes).
pub(crate) const MAX_CONTEXT_ID_BYTES: usize = 120;

/// Why a context got no agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ContextRefusal {
    /// Every live conversation is working and there is no room for another.
    #[error(
        "this server holds at most {max} conversations at once and every one is working: try again when one finishes"
    )]
    Busy { max: usize },
    /// The context's conversation was let go (idle) and no session log keeps it.
    #[error(
        "the conversation of context `{context}` has ended (it was idle and `{agent}` keeps no session log): send without a contextId to start another"
    )]
    Ended { agent: String, context: String },
    /// The context's session log was removed to keep the served agent's logs within their cap.
    #[error(
        "the conversation of context `{context}` has ended: its log was removed to make room (`{agent}` keeps at most {max} conversations' logs): send without a contextId to start another"
    )]
    Removed {
        agent: String,
        context: String,
        max: usize,
    },
    /// The context's session log reached its byte cap.
    #[error(
        "the conversation of context `{context}` is full: its log has reached the server's {max_bytes}-byte cap: start another context"
    )]
    Full { context: String, max_bytes: u64 },
    /// Every kept log belongs to a live conversation and there is no room for another.
    #[error(
        "`{agent}` keeps at most {max} conversations' logs and every one is live: try again when one is let go"
    )]
    NoLogRoom { agent: String, max: usize },
    /// The served behaviour is one conversation and already holds another context's.
    #[error(
        "`{agent}` is one conversation (it is not an LLM agent, so troupe cannot give each context its own) and it holds another caller's: this server takes no other context for it"
    )]
    Shared { agent: String },
    /// The context id is too long to name a session log after.
    #[error("a contextId is at most {MAX_CONTEXT_ID_BYTES} bytes")]
    TooLong,
    /// The agent for the context could not be started.
    #[error("the conversation's agent could not be started: {0}")]
    Spawn(String),
}

/// The agent a task of a context is asked through, held while the task runs: an agent of its
/// own is not retired while a lease on it is held.
pub(crate) struct Lease {
    /// The agent to ask (the served agent itself when its contexts share it).
    pub(crate) agent: String,
    held: Option<(Arc<Mutex<State>>, Key)>,
}

impl Lease {
    /// The task is over: its agent is idle again (once; dropping the lease does the same).
    /// A worker releases before it tells the caller the task ended, so that the caller's next
    /// message — another context, at the cap of live ones — finds the agent idle.
    pub(crate) fn release(&mut self) {
        if let Some((state, key)) = self.held.take()
            && let Some(live) = lock(&state).live.get_mut(&key)
        {
            live.running = live.running.saturating_sub(1);
            live.last_used = Instant::now();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.release();
    }
}

/// (served agent, caller, context id): a context is its caller's, so two callers' contexts of
/// one id are two conversations.
type Key = (String, String, String);

struct Live {
    agent: String,
    /// Tasks running on it now.
    running: usize,
    last_used: Instant,
}

#[derive(Default)]
struct State {
    live: HashMap<Key, Live>,
    spawned: u64,
    /// The context logs of each served agent that keeps a session log.
    logs: HashMap<String, ContextLogs>,
    /// The one (caller, context) of each served behaviour that is not an LLM agent, once asked.
    shared: HashMap<String, (String, String)>,
}

/// How many conversations, and how much of them, a server keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ContextBounds {
    /// Live agents, all served agents together.
    pub(crate) max_live: usize,
    /// How long one may sit idle before it is retired.
    pub(crate) idle_after: Duration,
    /// Context logs kept on disk per served agent.
    pub(crate) max_logs: usize,
    /// The size at which a context's log takes no more tasks.
    pub(crate) max_log_bytes: u64,
}

/// The served agents' conversations, one agent per context.
pub(crate) struct Conversations {
    spawner: TeamSpawner,
    /// The served LLM agents' specs, by name: what each context's agent is built from.
    specs: HashMap<String, AgentSpec>,
    max_live: usize,
    idle_after: Duration,
    /// One context starts at a time: the room count, the retirement and the spawn are one step.
    starting: tokio::sync::Mutex<()>,
    state: Arc<Mutex<State>>,
}

impl Conversations {
    pub(crate) fn new(
        spawner: TeamSpawner,
        specs: HashMap<String, AgentSpec>,
        bounds: ContextBounds,
    ) -> Self {
        let mut state = State::default();
        for (name, spec) in &specs {
            if let Some(session) = &spec.session {
                let logs = ContextLogs::open(session, bounds.max_logs, bounds.max_log_bytes);
                state.logs.insert(name.clone(), logs);
            }
        }
        Conversations {
            spawner,
            specs,
            max_live: bounds.max_live.max(1),
            idle_after: bounds.idle_after,
            starting: tokio::sync::Mutex::new(()),
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// The agent a task of `caller`'s `context` for `served` is asked through. `known`: the
    /// server has had tasks of this context (so a missing agent was retired, not never
    /// started).
    pub(crate) async fn lease(
        &self,
        served: &str,
        caller: &str,
        context: &str,
        known: bool,
    ) -> Result<Lease, ContextRefusal> {
        let Some(spec) = self.specs.get(served) else {
            self.bind_shared(served, caller, context)?;
            return Ok(Lease {
                agent: served.to_string(),
                held: None,
            });
        };
        if context.len() > MAX_CONTEXT_ID_BYTES {
            return Err(ContextRefusal::TooLong);
        }
        let _starting = self.starting.lock().await;
        let key = (served.to_string(), caller.to_string(), context.to_string());
        let mut retire = self.idle(&key);
        let taken = {
            let mut state = lock(&self.state);
            state.live.get_mut(&key).map(|live| {
                live.running += 1;
                live.agent.clone()
            })
        };
        if let Some(agent) = taken {
            self.retire(retire).await;
            let lease = self.held(agent, key);
            // A full log refuses the task; the lease, dropped, frees the agent again.
            self.log_has_room(served, caller, context)?;
            return Ok(lease);
        }
        if known && spec.session.is_none() {
            self.retire(retire).await;
            return Err(ContextRefusal::Ended {
                agent: served.to_string(),
                context: context.to_string(),
            });
        }
        if let Err(refusal) = self.resumable(served, caller, context, known) {
            self.retire(retire).await;
            return Err(refusal);
        }
        let (live_after, lru) = {
            let state = lock(&self.state);
            let lru = state
                .live
                .iter()
                .filter(|(_, live)| live.running == 0)
                .min_by_key(|(_, live)| live.last_used)
                .map(|(k, live)| (k.clone(), live.agent.clone()));
            (state.live.len(), lru)
        };
        if live_after >= self.max_live {
            match lru {
                Some(oldest) => retire.push(oldest),
                None => {
                    self.retire(retire).await;
                    return Err(ContextRefusal::Busy { max: self.max_live });
                }
            }
        }
        self.retire(retire).await;
        let log = self.keep_log(served, caller, context)?;
        let agent = {
            let mut state = lock(&self.state);
            state.spawned += 1;
            format!("{served}.a2a-{}", state.spawned)
        };
        let mut spec = spec.clone();
        spec.name.clone_from(&agent);
        if let Some(log) = log {
            if let Some(dir) = log.parent() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    ContextRefusal::Spawn(format!("creating {}: {e}", dir.display()))
                })?;
            }
            spec.session = Some(log);
        }
        self.spawner
            .spawn(agent.clone(), LlmAgent::factory(spec))
            .await
            .map_err(|e| ContextRefusal::Spawn(e.to_string()))?;
        lock(&self.state).live.insert(
            key.clone(),
            Live {
                agent: agent.clone(),
                running: 1,
                last_used: Instant::now(),
            },
        );
        Ok(self.held(agent, key))
    }

    /// Bind the served behaviour `served` (not an LLM agent) to `caller`'s `context`, its one
    /// conversation: `Err` when it is bound to another. Restored tasks bind it too, oldest
    /// first.
    pub(crate) fn bind_shared(
        &self,
        served: &str,
        caller: &str,
        context: &str,
    ) -> Result<(), ContextRefusal> {
        if self.specs.contains_key(served) {
            return Ok(());
        }
        let mut state = lock(&self.state);
        let bound = state
            .shared
            .entry(served.to_string())
            .or_insert_with(|| (caller.to_string(), context.to_string()));
        if bound.0 == caller && bound.1 == context {
            Ok(())
        } else {
            Err(ContextRefusal::Shared {
                agent: served.to_string(),
            })
        }
    }

    /// `Err` when the live context's log has reached its byte cap; else it was used now.
    fn log_has_room(
        &self,
        served: &str,
        caller: &str,
        context: &str,
    ) -> Result<(), ContextRefusal> {
        let mut state = lock(&self.state);
        let Some(logs) = state.logs.get_mut(served) else {
            return Ok(());
        };
        let log = logs.path(caller, context);
        if logs.full(&log) {
            return Err(ContextRefusal::Full {
                context: context.to_string(),
                max_bytes: logs.max_bytes(),
            });
        }
        logs.touch(&log);
        Ok(())
    }

    /// Whether a context with no live agent may be started (again) from its log: not when the
    /// server had tasks of it (`known`) and its log was removed, nor when the log is full.
    fn resumable(
        &self,
        served: &str,
        caller: &str,
        context: &str,
        known: bool,
    ) -> Result<(), ContextRefusal> {
        let state = lock(&self.state);
        let Some(logs) = state.logs.get(served) else {
            return Ok(());
        };
        let log = logs.path(caller, context);
        if known && !logs.kept(&log) {
            return Err(ContextRefusal::Removed {
                agent: served.to_string(),
                context: context.to_string(),
                max: logs.max(),
            });
        }
        if logs.full(&log) {
            return Err(ContextRefusal::Full {
                context: context.to_string(),
                max_bytes: logs.max_bytes(),
            });
        }
        Ok(())
    }

    /// The log the context's new agent keeps (`None` when the served agent keeps none), room
    /// made for it among the served agent's logs when it is new.
    fn keep_log(
        &self,
        served: &str,
        caller: &str,
        context: &str,
    ) -> Result<Option<std::path::PathBuf>, ContextRefusal> {
        let mut state = lock(&self.state);
        let State { live, logs, .. } = &mut *state;
        let Some(logs) = logs.get_mut(served) else {
            return Ok(None);
        };
        let log = logs.path(caller, context);
        if !logs.kept(&log) {
            let live: Vec<_> = live
                .keys()
                .filter(|(agent, _, _)| agent == served)
                .map(|(_, caller, context)| logs.path(caller, context))
                .collect();
            if !logs.make_room(|path| live.iter().any(|l| l == path)) {
                return Err(ContextRefusal::NoLogRoom {
                    agent: served.to_string(),
                    max: logs.max(),
                });
            }
        }
        logs.touch(&log);
        Ok(Some(log))
    }

    fn held(&self, agent: String, key: Key) -> Lease {
        Lease {
            agent,
            held: Some((self.state.clone(), key)),
        }
    }

    /// The idle agents past `idle_after` (but `keep`'s), taken out of the live ones.
    fn idle(&self, keep: &Key) -> Vec<(Key, String)> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        let stale: Vec<Key> = state
            .live
            .iter()
            .filter(|(k, live)| {
                *k != keep
                    && live.running == 0
                    && now.duration_since(live.last_used) >= self.idle_after
            })
            .map(|(k, _)| k.clone())
            .collect();
        stale
            .into_iter()
            .filter_map(|k| state.live.remove(&k).map(|live| (k, live.agent)))
            .collect()
    }

    /// Stop these contexts' agents and forget them (their logs stay for a later message).
    async fn retire(&self, agents: Vec<(Key, String)>) {
        for (key, agent) in agents {
            lock(&self.state).live.remove(&key);
            match self.spawner.retire(&agent).await {
                Ok(_) => {
                    tracing::debug!(agent = %agent, context = %key.2, "retired an idle A2A conversation")
                }
                Err(e) => {
                    tracing::warn!(agent = %agent, "could not retire an A2A conversation: {e}")
                }
            }
        }
    }
}
