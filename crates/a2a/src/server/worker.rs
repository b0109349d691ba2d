//! One task's run: the agent's request through the team's ask road, its text as artifact
//! chunks, its questions (approvals, budget pauses) as input-required, its end as the status.
//! The store (`tasks.rs`) keeps the tasks; a worker only tells it what happened.

use futures::StreamExt as _;
use tokio::sync::oneshot;
use troupe_protocol::Event;
use troupe_runtime::{AskItem, AskStream};

use crate::server::contexts::Lease;
use crate::server::status::{apply_status, status_update};
use crate::server::tasks::TaskStore;
use crate::wire::{
    Artifact, Message, Part, Role, StreamResponse, TaskArtifactUpdateEvent, TaskState,
};

/// The artifact every answer is written to.
const ANSWER_ARTIFACT: &str = "answer";

/// Runs one task: the agent's request, its text as artifact chunks, its end as the status.
pub(super) struct Worker {
    pub(super) store: TaskStore,
    pub(super) task_id: String,
    pub(super) context_id: String,
    /// The served agent (what the caller addressed, and what its questions name).
    pub(super) agent: String,
    /// The agent asked: the context's own, held until the task ends.
    pub(super) lease: Lease,
    /// The text streamed so far (the agent's deltas).
    pub(super) streamed: String,
    /// Its agent is paused by a budget.
    pub(super) paused: bool,
}

impl Worker {
    pub(super) async fn run(mut self, mut stream: AskStream, cancelled: oneshot::Receiver<()>) {
        self.status(TaskState::Working, None);
        let mut cancelled = std::pin::pin!(cancelled);
        let end = loop {
            let item = tokio::select! {
                item = stream.next() => item,
                // Dropping the stream (below) abandons the request: the agent stops and rolls
                // its conversation back.
                Ok(()) = &mut cancelled => break End::Cancelled,
            };
            match item {
                Some(Ok(AskItem::Event(Event::ModelDelta { agent, text })))
                    if agent == self.lease.agent =>
                {
                    self.delta(text);
                }
                Some(Ok(AskItem::Event(Event::ApprovalRequested {
                    id,
                    agent,
                    tool,
                    arguments,
                }))) => {
                    let agent = self.shown(agent);
                    let question = format!(
                        "`{agent}` asks to run `{tool}` with {arguments}: answer `yes` to run it, or anything else to refuse it (your words are the reason its model sees)"
                    );
                    self.store.request_approval(&self.task_id, id, question);
                }
                // The caller is asked to wait: only the operator can raise the budget.
                Some(Ok(AskItem::Event(Event::BudgetPaused { agent, exceeded }))) => {
                    let agent = self.shown(agent);
                    let budget = format!(
                        "its {} budget (spent {}; limit {})",
                        exceeded.scope, exceeded.spent, exceeded.limit
                    );
                    self.paused = true;
                    self.store.pause(&self.task_id, &agent, budget);
                }
                // Anything else the paused agent does means it went on: the budget was raised.
                Some(Ok(AskItem::Event(event))) => {
                    if self.paused && event.agent() == self.lease.agent {
                        self.paused = false;
                        self.store.resume(&self.task_id);
                    }
                }
                Some(Ok(AskItem::Answer(answer))) => break End::Answer(answer),
                Some(Ok(_)) => {}
                Some(Err(e)) => break End::Failed(e.to_string()),
                None => break End::Failed("the agent's request ended without an answer".into()),
            }
        };
        drop(stream);
        // The context's agent is free before the caller hears the task ended (a next message
        // in another context, at the cap of live ones, must not find it still working).
        self.lease.release();
        let (state, text) = match end {
            End::Answer(answer) => {
                self.answer(answer);
                (TaskState::Completed, None)
            }
            End::Cancelled => (
                TaskState::Canceled,
                Some("cancelled by the caller".to_string()),
            ),
            End::Failed(reason) => (TaskState::Failed, Some(reason)),
        };
        // The final state is written to the tasks file before anyone hears of it.
        self.store.finish(&self.task_id, move |task| {
            let update = status_update(task, state, text.as_deref());
            apply_status(task, &update);
            StreamResponse::StatusUpdate(update)
        });
    }

    /// An agent's name as the caller knows it: the context's own agent is the served one.
    fn shown(&self, agent: String) -> String {
        if agent == self.lease.agent {
            self.agent.clone()
        } else {
            agent
        }
    }

    fn status(&self, state: TaskState, text: Option<&str>) {
        let text = text.map(str::to_string);
        self.store.update(&self.task_id, move |task| {
            let update = status_update(task, state, text.as_deref());
            apply_status(task, &update);
            Some(StreamResponse::StatusUpdate(update))
        });
    }

    /// A piece of the answer as it is generated: appended to the answer artifact, in place
    /// (the work is the piece's, not the answer's so far: streaming is linear in the deltas).
    fn delta(&mut self, text: String) {
        let append = !self.streamed.is_empty();
        self.streamed.push_str(&text);
        let event = self.artifact_event(text.clone(), append, false);
        self.store.update(&self.task_id, move |task| {
            match task.artifacts.as_mut_slice() {
                [artifact] if append && artifact.artifact_id == ANSWER_ARTIFACT => {
                    match artifact.parts.last_mut().and_then(|p| p.text.as_mut()) {
                        Some(answer) => answer.push_str(&text),
                        None => artifact.parts.push(Part::text(text)),
                    }
                }
                _ => task.artifacts = vec![answer_artifact(text)],
            }
            Some(event)
        });
    }

    /// The answer: the artifact's final text. Streamed readers get only what the deltas did not
    /// already give them — nothing when they match, the whole answer again (replacing the
    /// artifact) when the deltas were not the answer (a turn that called tools first).
    fn answer(&mut self, answer: String) {
        let event = if self.streamed.is_empty() {
            Some(self.artifact_event(answer.clone(), false, true))
        } else if self.streamed == answer {
            Some(self.artifact_event(String::new(), true, true))
        } else {
            Some(self.artifact_event(answer.clone(), false, true))
        };
        let (task_id, context_id) = (self.task_id.clone(), self.context_id.clone());
        self.store.update(&self.task_id, move |task| {
            task.artifacts = vec![answer_artifact(answer.clone())];
            task.history.push(Message {
                context_id: Some(context_id),
                task_id: Some(task_id),
                ..Message::text(Role::Agent, answer)
            });
            event
        });
    }

    fn artifact_event(&self, text: String, append: bool, last_chunk: bool) -> StreamResponse {
        let parts = if text.is_empty() {
            Vec::new()
        } else {
            vec![Part::text(text)]
        };
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact: Artifact {
                artifact_id: ANSWER_ARTIFACT.into(),
                name: Some(ANSWER_ARTIFACT.into()),
                parts,
            },
            append,
            last_chunk,
        })
    }
}

fn answer_artifact(text: String) -> Artifact {
    Artifact {
        artifact_id: ANSWER_ARTIFACT.into(),
        name: Some(ANSWER_ARTIFACT.into()),
        parts: vec![Part::text(text)],
    }
}

enum End {
    Answer(String),
    Cancelled,
    Failed(String),
}
