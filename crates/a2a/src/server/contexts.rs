//! One conversation per A2A context: a served LLM agent answers each `contextId` with an agent
//! of its own, built from the served agent's spec (same model, instructions, tools, approval
//! policy, budgets) and spawned into the same team under the same supervisor — so its requests
//! go the team's one road (directory, events, approvals desk, traces) — with its own session log
//! beside the served agent's when that one keeps a log. Caller B's task never sees what caller A
//! told the agent, and a restarted server resumes a context's conversation from its log.
//!
//! Bounded: at most `max_live` such agents run at once. One idle past `idle_after` is retired
//! (stopped and forgotten) when the next context starts; at the cap the least recently used idle
//! one is retired for a new context, and when every one is working the new context is refused.
//! A retired context with a log comes back from it; one without a log has ended, and says so.
//!
//! A served agent that is not an `LlmAgent` (a behaviour troupe cannot build again) is asked as
//! it is: its contexts share it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use troupe_agents::{AgentSpec, LlmAgent};
use troupe_protocol::sync::lock;
use troupe_runtime::TeamSpawner;

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

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some((state, key)) = self.held.take()
            && let Some(live) = lock(&state).live.get_mut(&key)
        {
            live.running = live.running.saturating_sub(1);
            live.last_used = Instant::now();
        }
    }
}

/// (served agent, context id)
type Key = (String, String);

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
        max_live: usize,
        idle_after: Duration,
    ) -> Self {
        Conversations {
            spawner,
            specs,
            max_live: max_live.max(1),
            idle_after,
            starting: tokio::sync::Mutex::new(()),
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// The agent a task of `context` for `served` is asked through. `known`: the server has
    /// had tasks of this context (so a missing agent was retired, not never started).
    pub(crate) async fn lease(
        &self,
        served: &str,
        context: &str,
        known: bool,
    ) -> Result<Lease, ContextRefusal> {
        let Some(spec) = self.specs.get(served) else {
            return Ok(Lease {
                agent: served.to_string(),
                held: None,
            });
        };
        if context.len() > MAX_CONTEXT_ID_BYTES {
            return Err(ContextRefusal::TooLong);
        }
        let _starting = self.starting.lock().await;
        let key = (served.to_string(), context.to_string());
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
            return Ok(self.held(agent, key));
        }
        if known && spec.session.is_none() {
            self.retire(retire).await;
            return Err(ContextRefusal::Ended {
                agent: served.to_string(),
                context: context.to_string(),
            });
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
        let agent = {
            let mut state = lock(&self.state);
            state.spawned += 1;
            format!("{served}.a2a-{}", state.spawned)
        };
        let mut spec = spec.clone();
        spec.name.clone_from(&agent);
        if let Some(log) = spec.session.as_deref().map(|s| context_log(s, context)) {
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
                    tracing::debug!(agent = %agent, context = %key.1, "retired an idle A2A conversation")
                }
                Err(e) => {
                    tracing::warn!(agent = %agent, "could not retire an A2A conversation: {e}")
                }
            }
        }
    }
}

/// The session log of `context` beside the served agent's log `session`:
/// `{dir}/{stem}.a2a/{context as hex}.jsonl` (hex: any id, no path in it, no two ids alike).
fn context_log(session: &Path, context: &str) -> PathBuf {
    let stem = session
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "agent".into());
    let name: String = context.bytes().map(|b| format!("{b:02x}")).collect();
    session
        .with_file_name(format!("{stem}.a2a"))
        .join(format!("{name}.jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contexts_log_is_beside_the_agents_and_named_without_a_path_in_it() {
        let log = context_log(Path::new("/s/helper.jsonl"), "../x");
        assert_eq!(log, PathBuf::from("/s/helper.a2a/2e2e2f78.jsonl"));
        let longest = "x".repeat(MAX_CONTEXT_ID_BYTES);
        let name = context_log(Path::new("h.jsonl"), &longest);
        assert!(name.file_name().unwrap().len() <= 255);
    }
}
