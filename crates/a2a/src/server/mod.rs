//! A team's agents served over A2A 1.0 (JSON-RPC): each chosen agent at
//! `{base}/agents/{name}`, its card at `{base}/agents/{name}/.well-known/agent-card.json`.
//!
//! A served request goes the team's one road (`Team::ask_stream_with`): the agent's events,
//! budgets, approvals and traces are those of any request, and the caller's `traceparent` is the
//! parent of its trace. Each A2A context of a served LLM agent is a conversation of its own (an
//! agent built from the served one's spec: `contexts.rs`), and its tasks are listed per context
//! (`ListTasks`' `contextId`).

mod auth;
mod card;
mod context_logs;
mod contexts;
mod rpc;
mod status;
mod tasks;
mod tasks_file;
mod timestamp;
mod worker;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use troupe_agents::LlmAgent;
use troupe_host::serve::{Gate, ServeLimits, guard};
use troupe_runtime::Team;

pub use auth::ServerAuth;
pub use card::ServedAgent;

use crate::error::ServeError;
use crate::limits::DEFAULT_MAX_REQUEST_BYTES;
use crate::wire::CARD_PATH;

/// How long a stopping server waits for open streams before it drops them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// How many A2A conversations served agents hold at once by default.
pub const DEFAULT_MAX_CONTEXTS: usize = 64;
/// How long a conversation's agent sits idle before it is let go, by default.
pub const DEFAULT_CONTEXT_IDLE: Duration = Duration::from_secs(15 * 60);
/// How many contexts' session logs a served agent keeps on disk by default.
pub const DEFAULT_MAX_CONTEXT_LOGS: usize = 1000;
/// How large one context's session log may grow by default (16 MiB): with the default count,
/// a served agent's contexts use at most about 16 GiB.
pub const DEFAULT_MAX_CONTEXT_LOG_BYTES: u64 = 16 * 1024 * 1024;

/// What to serve, where, and to whom.
#[derive(Debug, Clone)]
pub struct A2aServeConfig {
    /// Where to listen (loopback unless the agents are meant for other machines).
    pub listen: SocketAddr,
    /// The agents to serve.
    pub agents: Vec<ServedAgent>,
    /// The callers and their keys: every JSON-RPC request needs one (there is no keyless
    /// server; `ServerAuth::random_key` makes one for the run).
    pub auth: ServerAuth,
    /// The largest request body read; a larger one is refused unread.
    pub max_request_bytes: usize,
    /// The base URL the cards give (e.g. behind a proxy); default `http://{listen address}`.
    /// Its host is one the server answers to (every other `Host` is refused).
    pub public_url: Option<String>,
    /// Origins whose browser pages may call the agents (`https://app.example`, whole: CORS
    /// with a preflight); every other origin's request is refused before it is read.
    pub allowed_origins: Vec<String>,
    /// A file keeping finished tasks across restarts (JSON lines, the newest 1,000); `None`:
    /// tasks live as long as the server.
    pub tasks_file: Option<std::path::PathBuf>,
    /// The most A2A contexts (conversations) served LLM agents hold at once, each an agent of
    /// its own; past it the least recently used idle one is let go, and with none idle a new
    /// context is refused.
    pub max_contexts: usize,
    /// How long a context's agent may sit idle before it is let go (its session log, when the
    /// served agent keeps one, brings it back at the context's next message).
    pub context_idle: Duration,
    /// The most contexts' session logs each served agent keeps on disk (`{stem}.a2a/`); a new
    /// context past it removes the least recently used one not live, and a message to that
    /// context is told it has ended.
    pub max_context_logs: usize,
    /// The size at which a context's session log takes no more tasks (the caller is told to
    /// start another context).
    pub max_context_log_bytes: u64,
    /// What one client may hold of the server (timeouts, connections).
    pub limits: ServeLimits,
}

impl A2aServeConfig {
    /// Serve `agents` on `listen` to the callers of `auth`, with the default bounds.
    pub fn new(listen: SocketAddr, agents: Vec<ServedAgent>, auth: ServerAuth) -> Self {
        A2aServeConfig {
            listen,
            agents,
            auth,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            public_url: None,
            allowed_origins: Vec::new(),
            tasks_file: None,
            max_contexts: DEFAULT_MAX_CONTEXTS,
            context_idle: DEFAULT_CONTEXT_IDLE,
            max_context_logs: DEFAULT_MAX_CONTEXT_LOGS,
            max_context_log_bytes: DEFAULT_MAX_CONTEXT_LOG_BYTES,
            limits: ServeLimits::default(),
        }
    }
}

/// A running A2A server.
#[derive(Debug)]
pub struct A2aServer {
    addr: SocketAddr,
    base: String,
    names: Vec<String>,
    closing: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

/// Serve `config.agents` of `team` over A2A until [`A2aServer::shutdown`] (or drop).
///
/// # Errors
/// No agents, an agent the team does not have, callers without a key of their own, an origin
/// or public URL the gate cannot take, an address that cannot be bound.
pub async fn serve(team: &Team, config: A2aServeConfig) -> Result<A2aServer, ServeError> {
    if config.agents.is_empty() {
        return Err(ServeError::NoAgents);
    }
    config.auth.check()?;
    for (name, value) in [
        ("max_contexts", config.max_contexts as u64),
        ("max_context_logs", config.max_context_logs as u64),
        ("max_context_log_bytes", config.max_context_log_bytes),
    ] {
        if value == 0 {
            return Err(ServeError::ZeroBound(name));
        }
    }
    for agent in &config.agents {
        if !team.directory().is_live(&agent.name) {
            return Err(ServeError::UnknownAgent(agent.name.clone()));
        }
    }
    let tasks_file = match &config.tasks_file {
        Some(path) => Some(tasks_file::TasksFile::open(path)?),
        None => None,
    };
    let bind_error = |source| ServeError::Bind {
        addr: config.listen,
        source,
    };
    let listener = TcpListener::bind(config.listen).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let mut gate = Gate::new(addr);
    if let Some(url) = &config.public_url {
        gate = gate.reached_as(url)?;
    }
    for origin in &config.allowed_origins {
        gate = gate.allow_origin(origin)?;
    }
    let base = config
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"))
        .trim_end_matches('/')
        .to_string();
    let cards = config
        .agents
        .iter()
        .map(|agent| {
            let url = format!("{base}/agents/{}", agent.name);
            (agent.name.clone(), agent.card(&url, &config.auth))
        })
        .collect::<HashMap<_, _>>();
    let names = config.agents.iter().map(|a| a.name.clone()).collect();
    let mut specs = HashMap::new();
    for agent in &config.agents {
        // An LLM agent's contexts each get an agent built like it; another behaviour is shared.
        if let Ok(Some(spec)) = team
            .with_agent::<LlmAgent, _, _>(&agent.name, |a| a.spec().clone())
            .await
        {
            specs.insert(agent.name.clone(), spec);
        }
    }
    let conversations = contexts::Conversations::new(
        team.spawner(),
        specs,
        contexts::ContextBounds {
            max_live: config.max_contexts,
            idle_after: config.context_idle,
            max_logs: config.max_context_logs,
            max_log_bytes: config.max_context_log_bytes,
        },
    );
    let served = Arc::new(rpc::Served {
        ask: Arc::new(team.stream_asker()),
        cards,
        auth: config.auth,
        max_request_bytes: config.max_request_bytes,
        tasks: tasks::TaskStore::new(team.approvals().clone(), tasks_file, conversations),
    });
    // The gate first: a request from a foreign Host or origin is refused before anything else.
    let app =
        rpc::router(served).layer(axum::middleware::from_fn_with_state(Arc::new(gate), guard));
    let (closing, mut closed) = watch::channel(false);
    let limits = config.limits;
    let task = tokio::spawn(async move {
        let shutdown = async move {
            let _ = closed.wait_for(|closed| *closed).await;
        };
        troupe_host::serve::serve(listener, app, limits, shutdown).await;
    });
    Ok(A2aServer {
        addr,
        base,
        names,
        closing,
        task: Some(task),
    })
}

impl A2aServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The served agents' names.
    pub fn agents(&self) -> &[String] {
        &self.names
    }

    /// An agent's base URL (what an A2A client is given; its card is beneath it).
    pub fn agent_url(&self, name: &str) -> String {
        format!("{}/agents/{name}", self.base)
    }

    /// An agent's card URL.
    pub fn card_url(&self, name: &str) -> String {
        format!("{}/{CARD_PATH}", self.agent_url(name))
    }

    /// Stop listening; open streams get two seconds (`SHUTDOWN_GRACE`) to end, then are dropped.
    pub async fn shutdown(mut self) {
        let _ = self.closing.send(true);
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(SHUTDOWN_GRACE, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for A2aServer {
    fn drop(&mut self) {
        let _ = self.closing.send(true);
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
