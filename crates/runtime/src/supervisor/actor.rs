//! The ractor actor that runs one agent's behaviour, one request at a time.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tracing::Instrument;

use std::sync::atomic::{AtomicBool, Ordering};

use crate::supervisor::behavior::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, Checkpoint,
};
use crate::supervisor::job::JobRequest;
use troupe_protocol::Event;
use troupe_protocol::TraceId;
use troupe_protocol::trace::semconv;

/// A message to an agent actor.
pub enum AgentMsg {
    /// Handle a request; answer on `reply` (or nowhere, for `send`).
    Request {
        /// The text and trace context of the request.
        request: AgentRequest,
        /// Where the answer goes.
        reply: Option<RpcReplyPort<Result<String, AgentError>>>,
    },
    /// Handle a typed job; answer on `reply`.
    Job {
        /// The typed job; the behaviour opens it as its own job enum.
        job: JobRequest,
        /// The caller's span: the spans the job opens are its children, in the caller's trace.
        span: tracing::Span,
        /// Whether the behaviour handled it (the answer itself goes through the job's own
        /// [`Reply`](crate::Reply)); an error here is the asker's error.
        reply: RpcReplyPort<Result<(), AgentError>>,
    },
    /// Run a closure on the behaviour between requests (typed access, runtime tool registration).
    Apply(BehaviorFn),
}

// In-process only (it carries closures and type-erased jobs): the default
// `serializable() == false` keeps it off the wire; remote requests reach an agent through its
// node's gateway, which asks it locally.
impl ractor::Message for AgentMsg {}

/// A closure run on an agent's behaviour between requests.
pub(crate) type BehaviorFn = Box<dyn FnOnce(&mut dyn AgentBehavior) + Send>;

impl fmt::Debug for AgentMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentMsg::Request { request, .. } => {
                f.debug_struct("Request").field("request", request).finish()
            }
            AgentMsg::Job { job, .. } => f.debug_struct("Job").field("job", job).finish(),
            AgentMsg::Apply(_) => f.write_str("Apply"),
        }
    }
}

/// The last checkpoint of every agent of a team, by name: what a restart restores.
#[derive(Debug, Clone, Default)]
pub(crate) struct CheckpointStore(Arc<Mutex<HashMap<String, CheckpointSlot>>>);

/// One agent's place in the [`CheckpointStore`]: its actor (and the actor that replaces it
/// after a restart) updates the checkpoint in place, without looking the name up again.
pub(crate) type CheckpointSlot = Arc<Mutex<Checkpoint>>;

impl CheckpointStore {
    /// The slot for `name`, made empty on first use.
    pub(crate) fn slot(&self, name: &str) -> CheckpointSlot {
        troupe_protocol::sync::lock(&self.0)
            .entry(name.to_string())
            .or_default()
            .clone()
    }

    /// Drop a retired agent's checkpoint.
    pub(crate) fn forget(&self, name: &str) {
        troupe_protocol::sync::lock(&self.0).remove(name);
    }

    pub(crate) fn get(&self, name: &str) -> Option<Checkpoint> {
        let slot = troupe_protocol::sync::lock(&self.0).get(name)?.clone();
        let checkpoint = troupe_protocol::sync::lock(&slot).clone();
        Some(checkpoint)
    }
}

/// The error an agent actor stops with when its behaviour reports a fatal error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct FatalAgentError(pub(crate) String);

pub(crate) struct AgentActor;

pub(crate) struct AgentActorArgs {
    pub(crate) ctx: AgentContext,
    pub(crate) behavior: Box<dyn AgentBehavior>,
    pub(crate) checkpoints: CheckpointStore,
    /// Set while a text request is being handled (read by `Directory::is_responding`).
    pub(crate) responding: Arc<AtomicBool>,
}

pub(crate) struct AgentState {
    ctx: AgentContext,
    behavior: Box<dyn AgentBehavior>,
    checkpoint: CheckpointSlot,
    responding: Arc<AtomicBool>,
}

impl AgentState {
    /// After a request or job: checkpoint unless it failed fatally; a fatal error is returned
    /// (after the caller has its reply) so the actor stops and the supervisor restarts it.
    fn settle<T>(&self, result: &Result<T, AgentError>) -> Result<(), ActorProcessingErr> {
        match result {
            Err(e) if e.is_fatal() => Err(Box::new(FatalAgentError(e.to_string()))),
            _ => {
                self.update_checkpoint();
                Ok(())
            }
        }
    }

    /// Bring the stored checkpoint up to date (the behaviour copies only what changed).
    fn update_checkpoint(&self) {
        self.behavior
            .update_checkpoint(&mut troupe_protocol::sync::lock(&self.checkpoint));
    }
}

/// Clears the responding flag however the handler ends (including a panic).
struct RespondingGuard<'a>(&'a AtomicBool);

impl Drop for RespondingGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// A request's [`Event::RequestStarted`] on creation and its [`Event::RequestFinished`] on
/// drop — also when the behaviour panics (the supervisor then restarts the agent), so every
/// started request is seen to finish.
struct RequestFinish<'a> {
    ctx: &'a AgentContext,
    trace_id: TraceId,
    /// The request's error; what a drop without one set (a panic) reports is the default.
    error: Option<String>,
}

impl<'a> RequestFinish<'a> {
    fn start(ctx: &'a AgentContext, trace_id: TraceId) -> Self {
        let agent = ctx.name.clone();
        ctx.events
            .publish(Some(trace_id), Event::RequestStarted { agent });
        RequestFinish {
            ctx,
            trace_id,
            error: Some("the agent panicked while handling the request".into()),
        }
    }
}

impl Drop for RequestFinish<'_> {
    fn drop(&mut self) {
        self.ctx.events.publish(
            Some(self.trace_id),
            Event::RequestFinished {
                agent: self.ctx.name.clone(),
                error: self.error.take(),
            },
        );
    }
}

impl Actor for AgentActor {
    type Msg = AgentMsg;
    type State = AgentState;
    type Arguments = AgentActorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let checkpoint = args.checkpoints.slot(&args.ctx.name);
        *troupe_protocol::sync::lock(&checkpoint) = args.behavior.checkpoint();
        Ok(AgentState {
            ctx: args.ctx,
            behavior: args.behavior,
            checkpoint,
            responding: args.responding,
        })
    }

    /// A graceful stop (team shutdown): the behaviour ends what it runs outside its requests,
    /// and the checkpoint keeps what that changed.
    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.behavior.stop(&state.ctx).await;
        state.update_checkpoint();
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            AgentMsg::Request { request, reply } => {
                let span = tracing::info_span!(
                    "invoke_agent",
                    { semconv::OPERATION_NAME } = "invoke_agent",
                    { semconv::AGENT_NAME } = %state.ctx.name,
                    { semconv::TRACE_ID } = %request.trace.id(),
                    { semconv::PARENT_SPAN_ID } = %format!("{:016x}", request.trace.span_id),
                    { semconv::FROM } = request.from.as_deref().unwrap_or("user"),
                    // Recorded by behaviours that keep a conversation (an `LlmAgent`).
                    { semconv::CONVERSATION_ID } = tracing::field::Empty,
                    { semconv::SESSION_ID } = tracing::field::Empty,
                );
                // Published here, not by the behaviour, so every behaviour's requests have them.
                let mut finish = RequestFinish::start(&state.ctx, request.trace.id());
                state.responding.store(true, Ordering::SeqCst);
                let guard = RespondingGuard(&state.responding);
                let result = state
                    .behavior
                    .handle(request, &state.ctx)
                    .instrument(span)
                    .await;
                drop(guard);
                let fatal = state.settle(&result);
                finish.error = result.as_ref().err().map(ToString::to_string);
                // Before the reply: a streamed request's stream ends with its answer, so the
                // finish must reach the stream first.
                drop(finish);
                if let Some(reply) = reply {
                    // The caller may have timed out and gone; that is not the agent's failure.
                    let _ = reply.send(result);
                }
                fatal?;
            }
            AgentMsg::Job { job, span, reply } => {
                // No span of its own: a job that does traced work (a compaction) opens its span
                // under the caller's, and one that does not (context statistics) leaves no
                // empty trace behind.
                let result = state
                    .behavior
                    .handle_job(job, &state.ctx)
                    .instrument(span)
                    .await;
                let fatal = state.settle(&result);
                let _ = reply.send(result);
                fatal?;
            }
            AgentMsg::Apply(f) => {
                f(state.behavior.as_mut());
                state.update_checkpoint();
            }
        }
        Ok(())
    }
}
