//! What an agent *does*: the [`AgentBehavior`] the supervisor's actors run.
//!
//! The runtime knows nothing about models or tools; the `troupe-agents` crate implements
//! [`AgentBehavior`] for LLM agents. Anything that can answer a text request can be an agent.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::event_bus::EventBus;
use crate::supervisor::directory::Directory;
use crate::supervisor::job::JobRequest;
use troupe_protocol::Conversation;
use troupe_protocol::ModelError;
use troupe_protocol::TraceContext;

/// A request to an agent: text from a person or another agent, with the trace it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRequest {
    /// Who sent it (an agent's name), or `None` for the program/user.
    pub from: Option<String>,
    /// The request text.
    pub text: String,
    /// The trace of the request that caused this message.
    pub trace: TraceContext,
    /// The JSON Schema the answer must match, for a typed ask
    /// ([`Team::ask_typed`](crate::Team::ask_typed)); every model call of this request carries
    /// it. `None`: free text.
    pub response_format: Option<troupe_protocol::ResponseFormat>,
    /// The request's id, when its caller may deliver it more than once (an ask across nodes
    /// is retried to the agent's new home under the same id): an agent with a session log
    /// records it, and answers a request whose id it already handled from the log instead of
    /// running it again. `None`: a request that is delivered once.
    pub request_id: Option<String>,
}

impl AgentRequest {
    /// A request id unique across nodes and restarts (for [`AgentRequest::request_id`]):
    /// `origin` (who delivers it: a node's name), a random salt drawn once per process, and a
    /// count.
    pub fn fresh_id(origin: &str) -> String {
        static SALT: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let salt = SALT.get_or_init(|| TraceContext::new_root().trace_id);
        let count = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{origin}-{salt:032x}-{count}")
    }

    /// A request from the program (not from another agent) starting a new trace.
    pub fn from_user(text: impl Into<String>) -> Self {
        AgentRequest {
            from: None,
            text: text.into(),
            trace: TraceContext::new_root(),
            response_format: None,
            request_id: None,
        }
    }
}

/// Why an agent could not answer a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum AgentError {
    /// The model call failed: match the [`ModelError`] to tell a rate limit from a context
    /// overflow.
    #[error("model error: {0}")]
    Model(ModelError),
    /// The turn loop hit `max_turns` without a final answer.
    #[error("no final answer after {0} model turns")]
    MaxTurns(u32),
    /// The request was refused (e.g. "cannot compact while responding").
    #[error("{0}")]
    Refused(String),
    /// The request could not fit the model's context window with room for the answer, even
    /// after compaction; nothing was sent to the model and the conversation is as the request
    /// found it.
    #[error("{0}")]
    ContextOverflow(crate::ContextOverflow),
    /// Anything else the behaviour reports; the agent keeps running.
    #[error("{0}")]
    Failed(String),
    /// Whoever asked stopped listening (a dropped [`AskStream`](crate::AskStream)): the request
    /// was abandoned and the conversation is as the request found it.
    #[error("cancelled: the caller stopped listening")]
    Cancelled,
    /// A failure that leaves the agent unusable: the supervisor restarts it from its checkpoint.
    #[error("fatal: {0}")]
    Fatal(String),
    /// A budget was spent: the request ended before its next model call. What it added so far
    /// (answers, tool results) stays in the conversation.
    #[error("{0}")]
    BudgetExceeded(troupe_protocol::BudgetExceeded),
}

impl AgentError {
    /// Whether the supervisor should restart the agent after this error.
    pub fn is_fatal(&self) -> bool {
        matches!(self, AgentError::Fatal(_))
    }
}

/// What an agent needs to survive a restart: its conversation and any behaviour-specific state.
#[derive(Debug, Clone, Default)]
pub struct Checkpoint {
    /// The conversation as of the last completed request.
    pub conversation: Conversation,
    /// Behaviour-specific state (e.g. the file ledger), typed.
    pub state: BehaviorState,
}

/// A behaviour's own state in a [`Checkpoint`] (e.g. an `LlmAgent`'s file ledger and archive):
/// typed and shared, so storing a checkpoint neither serializes nor deep-copies it. The
/// behaviour that wrote it reads it back with [`BehaviorState::get`] when it is rebuilt.
#[derive(Clone, Default)]
pub struct BehaviorState(Option<Arc<dyn Any + Send + Sync>>);

impl BehaviorState {
    /// State holding `value`.
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        BehaviorState(Some(Arc::new(value)))
    }

    /// The state, if it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_deref()?.downcast_ref::<T>()
    }

    /// The state to change in place, if it is a `T` that no clone of this checkpoint shares.
    pub fn get_mut<T: Any>(&mut self) -> Option<&mut T> {
        Arc::get_mut(self.0.as_mut()?)?.downcast_mut::<T>()
    }

    /// Whether there is no state.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl std::fmt::Debug for BehaviorState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(_) => f.write_str("BehaviorState(..)"),
            None => f.write_str("BehaviorState(empty)"),
        }
    }
}

/// What a behaviour may use while handling a request.
#[derive(Debug, Clone)]
pub struct AgentContext {
    /// This agent's name.
    pub name: String,
    /// The team's address book: ask or send to other agents by name.
    pub directory: Directory,
    /// The team's event bus.
    pub events: EventBus,
    /// The team's open tool-approval requests.
    pub approvals: crate::approval::Approvals,
}

/// The logic of one agent. Handles one request at a time.
///
/// `Any` is a supertrait so that [`Team::with_agent`](crate::Team::with_agent) can reach the
/// behaviour typed (`&mut dyn AgentBehavior` upcasts to `&mut dyn Any`) without every
/// behaviour writing the downcast itself.
#[async_trait]
pub trait AgentBehavior: Any + Send {
    /// Answer one request. Returning [`AgentError::Fatal`] (or panicking) restarts the agent
    /// from its last checkpoint; any other error is returned to the caller and the agent goes on.
    async fn handle(
        &mut self,
        request: AgentRequest,
        ctx: &AgentContext,
    ) -> Result<String, AgentError>;

    /// Handle a typed job (see [`Directory::ask_job`]): open it once as this behaviour's job
    /// enum ([`JobRequest::open`]), `match` its variants and answer each through the
    /// [`Reply`](crate::Reply) it carries. An error returned here reaches the asker as
    /// [`AskError::Agent`](crate::AskError::Agent) (a fatal one restarts the agent). The default
    /// refuses every job: most agents only take text.
    async fn handle_job(&mut self, job: JobRequest, ctx: &AgentContext) -> Result<(), AgentError> {
        Err(job.refuse(&ctx.name))
    }

    /// The agent is stopping ([`Team::shutdown`](crate::Team::shutdown)), between requests:
    /// end the work this behaviour runs outside its requests (tasks of its own) before this
    /// returns, so that nothing it started outlives the team — a span still open past shutdown
    /// keeps its request's spans out of the exported trace. Bounded by
    /// [`TeamConfig::shutdown_grace`](crate::TeamConfig::shutdown_grace): an agent whose stop
    /// takes longer is killed. Not called when the agent fails (the supervisor restarts it from
    /// its checkpoint) or is killed. The default has nothing to end.
    async fn stop(&mut self, ctx: &AgentContext) {
        let _ = ctx;
    }

    /// The state to restore after a restart, whole: what the agent's first checkpoint is.
    fn checkpoint(&self) -> Checkpoint;

    /// Bring `checkpoint` — this agent's last one — up to date. Called after every request, job
    /// or [`Team::with_agent`](crate::Team::with_agent) closure that did not fail fatally, so
    /// it should cost what the request changed, not what the agent holds: follow the
    /// conversation with [`Conversation::catch_up`], keep state that did not change, and leave
    /// the checkpoint alone if nothing can change (a behaviour without state). The default
    /// stores a whole new [`checkpoint`](Self::checkpoint).
    fn update_checkpoint(&self, checkpoint: &mut Checkpoint) {
        *checkpoint = self.checkpoint();
    }
}

/// Builds an agent's behaviour: fresh (`None`) or restored from a checkpoint after a failure.
pub type BehaviorFactory =
    Arc<dyn Fn(Option<Checkpoint>) -> Result<Box<dyn AgentBehavior>, AgentError> + Send + Sync>;
