//! A remote A2A agent as a teammate: an [`AgentBehavior`] like any other, so it is asked by name
//! through the team's directory (`team.ask`, `ask_agent`), its text reaches the asker's stream as
//! [`Event::ModelDelta`](troupe_protocol::Event::ModelDelta)s, its request opens and closes like
//! any agent's, and its call is a span of the request that made it — there is no second way to
//! ask it.
//!
//! One troupe agent is one conversation, so it keeps one A2A `contextId` (in its checkpoint: a
//! restart keeps the conversation). A task that needs input answers the asker with the agent's
//! question; the asker's next request to this agent is the answer, sent on the same task. A
//! request the asker abandons (a dropped stream), or one dropped mid-call, cancels its remote
//! task.

use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument as _;
use troupe_protocol::trace::semconv;
use troupe_protocol::{Conversation, TraceContext};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, BehaviorState,
    Checkpoint, Team, TeamError,
};

use crate::client::{A2aClient, A2aRemote};
use crate::error::A2aError;
use crate::wire::{
    AgentCard, Message, Role, SendMessageRequest, SendMessageResponse, StreamResponse, TaskState,
    parts_text,
};

/// The start of an answer that is the remote agent's question (its task is `input-required`).
pub const INPUT_REQUIRED_PREFIX: &str = "[input required] ";

/// What a remote agent's conversation is on this side: its context, and the task waiting for
/// the asker's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteConversation {
    /// The A2A `contextId` every message of this agent carries once the peer gave one.
    pub context_id: Option<String>,
    /// The task waiting for input: the next request answers it.
    pub waiting_task: Option<String>,
}

/// A remote A2A agent's behaviour.
pub struct A2aAgent {
    client: Arc<A2aClient>,
    conversation: RemoteConversation,
}

impl A2aAgent {
    /// A behaviour factory for the agent `client` reaches, restoring its conversation from a
    /// checkpoint after a restart.
    pub fn factory(client: Arc<A2aClient>) -> BehaviorFactory {
        Arc::new(move |checkpoint: Option<Checkpoint>| {
            let conversation = checkpoint
                .as_ref()
                .and_then(|c| c.state.get::<RemoteConversation>().cloned())
                .unwrap_or_default();
            Ok(Box::new(A2aAgent {
                client: client.clone(),
                conversation,
            }) as Box<dyn AgentBehavior>)
        })
    }

    /// Where this agent's conversation stands.
    pub fn conversation(&self) -> &RemoteConversation {
        &self.conversation
    }
}

/// Why a remote agent did not join the team.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// Its card could not be read or believed.
    #[error("A2A agent at {url}: {source}")]
    Connect {
        /// Its base URL.
        url: String,
        /// Why.
        source: A2aError,
    },
    /// The team refused the name.
    #[error(transparent)]
    Team(#[from] TeamError),
}

/// Read the card at `remote` and add the agent to `team` as `name`: from then on it is asked
/// like any teammate. Returns its card.
///
/// # Errors
/// [`JoinError::Connect`] when the card cannot be read or believed (see
/// [`A2aClient::connect`]), [`JoinError::Team`] when the name is taken.
pub async fn join_team(
    team: &Team,
    name: &str,
    remote: &A2aRemote,
) -> Result<AgentCard, JoinError> {
    let client = A2aClient::connect(remote)
        .await
        .map_err(|source| JoinError::Connect {
            url: remote.base_url.clone(),
            source,
        })?;
    let card = client.card().clone();
    team.spawn(name, A2aAgent::factory(Arc::new(client)))
        .await?;
    Ok(card)
}

#[async_trait]
impl AgentBehavior for A2aAgent {
    async fn handle(
        &mut self,
        request: AgentRequest,
        ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        let trace = request.trace.child();
        let span = tracing::info_span!(
            "a2a_call",
            { semconv::OPERATION_NAME } = "a2a_call",
            { semconv::AGENT_NAME } = %ctx.name,
            { semconv::TRACE_ID } = %trace.id(),
            { semconv::SPAN_ID } = %format!("{:016x}", trace.span_id),
            error.type = tracing::field::Empty,
        );
        let watch = ctx.events.watch_of(request.trace.id());
        let answering = self.conversation.waiting_task.take();
        let mut call = RemoteCall::new(self.client.clone(), answering.clone());
        let mut message = Message::text(Role::User, request.text);
        message.context_id = self.conversation.context_id.clone();
        message.task_id = call.task_id.clone();
        let send = SendMessageRequest {
            message,
            configuration: None,
        };
        let deadline = self.client.limits().deadline;
        let work = call
            .run(&send, &trace, ctx, request.trace)
            .instrument(span.clone());
        let abandoned = async {
            match &watch {
                Some(watch) => watch.abandoned().await,
                None => std::future::pending().await,
            }
        };
        let result = tokio::select! {
            result = tokio::time::timeout(deadline, work) => result.unwrap_or_else(|_| Err(A2aError::Timeout {
                what: "the remote agent's task".into(),
                secs: deadline.as_secs_f64(),
            })),
            // The call, dropped unsettled on the way out, cancels its task.
            () = abandoned => return Err(AgentError::Cancelled),
        };
        if let Some(context) = &call.context_id {
            self.conversation.context_id = Some(context.clone());
        }
        let outcome = match result {
            Ok(()) => call.outcome(&ctx.name),
            Err(e) => Err(AgentError::Failed(format!("A2A agent `{}`: {e}", ctx.name))),
        };
        match &outcome {
            Ok(Answer::Question(_)) => self.conversation.waiting_task = call.task_id.clone(),
            // An answer that never reached the task (the peer unreachable): the task still
            // waits, and the asker's next request answers it again.
            Err(_) if call.state == TaskState::Unspecified => {
                self.conversation.waiting_task = answering;
            }
            _ => {}
        }
        if let Err(e) = &outcome {
            span.record("error.type", tracing::field::display(e));
        }
        outcome.map(Answer::into_text)
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            conversation: Conversation::default(),
            state: BehaviorState::new(self.conversation.clone()),
        }
    }
}

/// What the remote task ended with, for the asker.
enum Answer {
    Done(String),
    Question(String),
}

impl Answer {
    fn into_text(self) -> String {
        match self {
            Answer::Done(text) => text,
            Answer::Question(question) => format!("{INPUT_REQUIRED_PREFIX}{question}"),
        }
    }
}

/// One request's remote task, followed event by event; dropped before the task finished, it
/// cancels the task.
struct RemoteCall {
    client: Arc<A2aClient>,
    /// The task: the one this request answers, else the first the peer names.
    task_id: Option<String>,
    context_id: Option<String>,
    state: TaskState,
    /// The artifacts' text by artifact id, in the order they came; their sum capped.
    artifacts: Vec<(String, String)>,
    /// A direct answer's text.
    text: String,
    /// The last status message's text (a question, a failure's reason).
    status_text: String,
    /// A direct answer (a message, no task).
    direct: bool,
}

impl RemoteCall {
    fn new(client: Arc<A2aClient>, task_id: Option<String>) -> Self {
        RemoteCall {
            client,
            task_id,
            context_id: None,
            state: TaskState::Unspecified,
            artifacts: Vec::new(),
            text: String::new(),
            status_text: String::new(),
            direct: false,
        }
    }

    fn settled(&self) -> bool {
        self.direct || self.state.is_terminal() || self.state.is_interrupted()
    }

    async fn run(
        &mut self,
        send: &SendMessageRequest,
        trace: &TraceContext,
        ctx: &AgentContext,
        request_trace: TraceContext,
    ) -> Result<(), A2aError> {
        let client = self.client.clone();
        if !client.streams() {
            match client.send(send, Some(trace)).await? {
                SendMessageResponse::Task(task) => {
                    self.absorb(StreamResponse::Task(task))?;
                }
                SendMessageResponse::Message(message) => {
                    self.absorb(StreamResponse::Message(message))?;
                }
            }
            return Ok(());
        }
        let mut stream = client.stream(send, Some(trace)).await?;
        while let Some(event) = stream.next().await {
            if let Some(delta) = self.absorb(event?)? {
                ctx.events
                    .publish_delta(request_trace.id(), &ctx.name, delta)
                    .await;
            }
            if self.settled() {
                return Ok(());
            }
        }
        Err(A2aError::Malformed {
            what: "the agent's stream".into(),
            reason: format!(
                "it ended with the task {:?}, neither finished nor waiting",
                self.state
            ),
        })
    }

    /// Take in one event; the new text it carries, if any.
    fn absorb(&mut self, event: StreamResponse) -> Result<Option<String>, A2aError> {
        match event {
            StreamResponse::Task(task) => {
                self.own(&task.id)?;
                self.context_id = Some(task.context_id);
                self.status(task.status.state, task.status.message.as_ref());
                // A task's artifacts are whole: they stand for what chunks said, if any came.
                if self.artifacts.is_empty() {
                    for artifact in &task.artifacts {
                        self.artifact(&artifact.artifact_id, &parts_text(&artifact.parts), true)?;
                    }
                }
                Ok(None)
            }
            StreamResponse::Message(message) => {
                if message.context_id.is_some() {
                    self.context_id = message.context_id.clone();
                }
                self.direct = true;
                let text = message.text_content();
                self.check_room(text.len())?;
                self.text = text;
                Ok(None)
            }
            StreamResponse::StatusUpdate(update) => {
                self.own(&update.task_id)?;
                self.context_id = Some(update.context_id);
                self.status(update.status.state, update.status.message.as_ref());
                Ok(None)
            }
            StreamResponse::ArtifactUpdate(update) => {
                self.own(&update.task_id)?;
                let chunk = parts_text(&update.artifact.parts);
                let appended =
                    self.artifact(&update.artifact.artifact_id, &chunk, update.append)?;
                // A replacement is not new text to a reader who followed the chunks.
                Ok(Some(chunk).filter(|c| appended && !c.is_empty()))
            }
        }
    }

    /// Refuse an event of a task this request did not start or answer.
    fn own(&mut self, task_id: &str) -> Result<(), A2aError> {
        match &self.task_id {
            Some(ours) if ours != task_id => Err(A2aError::ForeignTask {
                ours: ours.clone(),
                got: task_id.to_string(),
            }),
            Some(_) => Ok(()),
            None => {
                self.task_id = Some(task_id.to_string());
                Ok(())
            }
        }
    }

    fn status(&mut self, state: TaskState, message: Option<&Message>) {
        self.state = state;
        if let Some(message) = message {
            self.status_text = message.text_content();
        }
    }

    /// Take in an artifact's chunk: appended to the artifact of its id, or replacing it (A2A's
    /// `append: false`); whether it was appended (or is a new artifact).
    fn artifact(&mut self, id: &str, chunk: &str, append: bool) -> Result<bool, A2aError> {
        let index = self.artifacts.iter().position(|(a, _)| a == id);
        let growth = match (index, append) {
            (Some(i), false) => chunk.len().saturating_sub(self.artifacts[i].1.len()),
            _ => chunk.len(),
        };
        self.check_room(growth)?;
        match (index, append) {
            (Some(i), true) => self.artifacts[i].1.push_str(chunk),
            (Some(i), false) => {
                self.artifacts[i].1 = chunk.to_string();
                return Ok(false);
            }
            (None, _) => self.artifacts.push((id.to_string(), chunk.to_string())),
        }
        Ok(true)
    }

    /// Refuse text past the answer cap.
    fn check_room(&self, more: usize) -> Result<(), A2aError> {
        let cap = self.client.limits().answer_bytes;
        let held: usize =
            self.artifacts.iter().map(|(_, t)| t.len()).sum::<usize>() + self.text.len();
        if held + more > cap {
            return Err(A2aError::TooLarge {
                what: "the agent's answer".into(),
                cap,
            });
        }
        Ok(())
    }

    /// The artifacts' text, one after another (separate artifacts on separate lines).
    fn artifacts_text(&self) -> String {
        let texts: Vec<&str> = self.artifacts.iter().map(|(_, t)| t.as_str()).collect();
        texts.join("\n")
    }

    fn outcome(&self, name: &str) -> Result<Answer, AgentError> {
        if self.direct {
            return Ok(Answer::Done(self.text.clone()));
        }
        match self.state {
            TaskState::Completed => {
                let text = self.artifacts_text();
                Ok(Answer::Done(if text.is_empty() {
                    self.status_text.clone()
                } else {
                    text
                }))
            }
            TaskState::InputRequired => Ok(Answer::Question(self.status_text.clone())),
            TaskState::AuthRequired => Err(AgentError::Failed(format!(
                "A2A agent `{name}` needs credentials for this task: {}",
                self.status_text
            ))),
            state => Err(AgentError::Failed(format!(
                "A2A agent `{name}`: its task ended {state:?}{}",
                if self.status_text.is_empty() {
                    String::new()
                } else {
                    format!(": {}", self.status_text)
                }
            ))),
        }
    }
}

impl Drop for RemoteCall {
    fn drop(&mut self) {
        // Settled, or never acknowledged by the peer in this call (an answer to a waiting task
        // that did not get through leaves the task waiting, not cancelled).
        if self.settled() || self.state == TaskState::Unspecified {
            return;
        }
        let Some(task_id) = self.task_id.clone() else {
            return;
        };
        // Outside a runtime (a team torn down) there is nothing to send it with.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        runtime.spawn(async move {
            if let Err(e) = client.cancel_task(&task_id).await {
                tracing::warn!(task = %task_id, "cancelling an abandoned A2A task failed: {e}");
            }
        });
    }
}
