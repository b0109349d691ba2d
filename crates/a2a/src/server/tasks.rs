//! The server's tasks: one per message sent (or per answer to a waiting task), each kept by id
//! with the agent it was sent to and its conversation (`contextId`), run through the team's one
//! ask road (`Team::ask_stream_with`), its events broadcast to whoever streams it.
//!
//! Bounded: at most [`MAX_TASKS`] are kept, the oldest finished ones dropped first; a stream that
//! falls [`EVENT_ROOM`] events behind is told so and ended (the task goes on; `GetTask` has it).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, oneshot};
use troupe_protocol::sync::lock;
use troupe_protocol::{ApprovalDecision, ApprovalId, TraceContext};
use troupe_runtime::approval::Approvals;
use troupe_runtime::{AgentRequest, AskStream};

use crate::ids::new_id;
use crate::server::contexts::{ContextRefusal, Conversations};
use crate::server::journal::{JournalLine, TaskJournal};
use crate::server::timestamp::now;
use crate::server::worker::Worker;
use crate::wire::{
    Message, Role, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent,
};

/// How the server asks the team's agents: `Team::stream_asker`, the team's one ask road.
pub(crate) type Asker = Arc<dyn Fn(&str, AgentRequest) -> AskStream + Send + Sync>;

/// How many tasks the server keeps.
pub(crate) const MAX_TASKS: usize = 1000;
/// How many events a streaming caller may fall behind.
pub(crate) const EVENT_ROOM: usize = 1024;

struct Entry {
    agent: String,
    task: Task,
    /// When it was created, for eviction and listing (newest first).
    seq: u64,
    /// While it runs: its events, and the switch that cancels it.
    running: Option<Running>,
    /// Tool calls of its request waiting for approval, oldest first, each with its question:
    /// the task is `input-required` while there is one, and the caller's next message on the
    /// task answers the first.
    waiting: VecDeque<(ApprovalId, String)>,
    /// The budget its agent is paused by, in words (`its request budget (spent …; limit …)`),
    /// while it is: the task is `input-required`, and only the operator can end it.
    paused: Option<String>,
}

struct Running {
    events: broadcast::Sender<StreamResponse>,
    cancel: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    next_seq: u64,
}

/// Why a task operation was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TaskRefusal {
    /// No such task for this agent.
    NotFound,
    /// It is finished.
    Finished(TaskState),
    /// Its context got no conversation.
    Context(ContextRefusal),
}

/// The tasks of one server.
#[derive(Clone)]
pub(crate) struct TaskStore {
    inner: Arc<Mutex<Inner>>,
    /// The team's approval desk: a caller's answer to an `input-required` task goes there.
    approvals: Approvals,
    /// Where finished tasks are kept across restarts, if anywhere.
    journal: Option<Arc<TaskJournal>>,
    /// The agent each context is asked through.
    conversations: Arc<Conversations>,
}

impl TaskStore {
    /// The tasks of a team with this approval desk.
    pub(crate) fn new(
        approvals: Approvals,
        journal: Option<(TaskJournal, Vec<JournalLine>)>,
        conversations: Conversations,
    ) -> Self {
        let mut inner = Inner::default();
        let journal = journal.map(|(journal, restored)| {
            for line in restored {
                // A served behaviour's one conversation outlives the restart with its tasks.
                let _ = conversations.bind_shared(&line.agent, &line.task.context_id);
                inner.next_seq += 1;
                let entry = Entry {
                    agent: line.agent,
                    task: line.task,
                    seq: inner.next_seq,
                    running: None,
                    waiting: VecDeque::new(),
                    paused: None,
                };
                inner.tasks.insert(entry.task.id.clone(), entry);
            }
            Arc::new(journal)
        });
        TaskStore {
            inner: Arc::new(Mutex::new(inner)),
            approvals,
            journal,
            conversations: Arc::new(conversations),
        }
    }

    /// Start a task for `agent` on `message`: the task as created, and its events from the
    /// start. `task_id` continues a task (it must be this agent's and not finished). A new task
    /// is asked of its context's own conversation ([`Conversations`]).
    pub(crate) async fn start(
        &self,
        ask: &Asker,
        agent: &str,
        message: Message,
        trace: TraceContext,
    ) -> Result<(Task, broadcast::Receiver<StreamResponse>), TaskRefusal> {
        let text = message.text_content();
        if let Some(id) = &message.task_id {
            let mut inner = lock(&self.inner);
            let entry = inner
                .tasks
                .get_mut(id)
                .filter(|e| e.agent == agent)
                .ok_or(TaskRefusal::NotFound)?;
            return self.answer(entry, message);
        }
        let context_id = message.context_id.clone().unwrap_or_else(new_id);
        let known = message.context_id.is_some()
            && lock(&self.inner)
                .tasks
                .values()
                .any(|e| e.agent == agent && e.task.context_id == context_id);
        let lease = self
            .conversations
            .lease(agent, &context_id, known)
            .await
            .map_err(TaskRefusal::Context)?;
        let (events, receiver) = broadcast::channel(EVENT_ROOM);
        let (cancel, cancelled) = oneshot::channel();
        let task = {
            let mut inner = lock(&self.inner);
            let id = new_id();
            let mut message = message;
            message.task_id = Some(id.clone());
            message.context_id = Some(context_id.clone());
            let task = Task {
                id: id.clone(),
                context_id,
                status: TaskStatus {
                    state: TaskState::Submitted,
                    message: None,
                    timestamp: Some(now()),
                },
                artifacts: Vec::new(),
                history: vec![message],
            };
            inner.next_seq += 1;
            let seq = inner.next_seq;
            inner.tasks.insert(
                id,
                Entry {
                    agent: agent.to_string(),
                    task: task.clone(),
                    seq,
                    running: Some(Running {
                        events,
                        cancel: Some(cancel),
                    }),
                    waiting: VecDeque::new(),
                    paused: None,
                },
            );
            evict(&mut inner);
            task
        };
        let request = AgentRequest {
            from: None,
            text,
            trace,
            response_format: None,
        };
        let stream = ask(&lease.agent, request);
        let worker = Worker {
            store: self.clone(),
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            agent: agent.to_string(),
            lease,
            streamed: String::new(),
            paused: false,
        };
        tokio::spawn(worker.run(stream, cancelled));
        Ok((task, receiver))
    }

    /// The caller's answer to a task waiting for an approval: `yes` (or `y`, `approve`, `ok`)
    /// runs the call, anything else denies it with that text as the reason the model sees. The
    /// task works on (or asks about the next waiting call); its events go on from here.
    fn answer(
        &self,
        entry: &mut Entry,
        message: Message,
    ) -> Result<(Task, broadcast::Receiver<StreamResponse>), TaskRefusal> {
        let state = entry.task.status.state;
        let Some(running) = &entry.running else {
            return Err(TaskRefusal::Finished(state));
        };
        let Some((approval, _)) = entry.waiting.front() else {
            return match &entry.paused {
                Some(budget) => Ok(still_paused(entry, budget.clone(), message)),
                None => Err(TaskRefusal::Finished(state)),
            };
        };
        let text = message.text_content();
        let decision = match text.trim().to_ascii_lowercase().as_str() {
            "yes" | "y" | "approve" | "approved" | "ok" => {
                ApprovalDecision::Approve { arguments: None }
            }
            _ => ApprovalDecision::Deny {
                reason: text.trim().to_string(),
            },
        };
        // The answer is to the call the task's status shows, the first waiting: the status moves
        // to the next only here, so an answer never reaches a call its caller was not shown. One
        // decided meanwhile (by the operator, or its wait ran out) is decided already: the
        // answer decides nothing, and the caller is told so.
        let late = match self.approvals.decide(approval, decision) {
            Ok(()) => None,
            Err(e) => {
                tracing::debug!(task = %entry.task.id, "an A2A answer came for a closed approval: {e}");
                Some(
                    "That call was already decided (by its operator, or its wait ran out): your answer decided nothing.",
                )
            }
        };
        let receiver = running.events.subscribe();
        let events = running.events.clone();
        entry.waiting.pop_front();
        entry.task.history.push(message);
        let (state, question) = match (entry.waiting.front(), late) {
            (Some((_, question)), Some(late)) => {
                (TaskState::InputRequired, Some(format!("{late} {question}")))
            }
            (Some((_, question)), None) => (TaskState::InputRequired, Some(question.clone())),
            (None, late) => (TaskState::Working, late.map(str::to_string)),
        };
        let update = status_update(&entry.task, state, question.as_deref());
        apply_status(&mut entry.task, &update);
        let _ = events.send(StreamResponse::StatusUpdate(update));
        Ok((entry.task.clone(), receiver))
    }

    /// A tool call of the task's request waits for approval: the task asks its caller.
    pub(super) fn request_approval(&self, id: &str, approval: ApprovalId, question: String) {
        let mut inner = lock(&self.inner);
        let Some(entry) = inner.tasks.get_mut(id) else {
            return;
        };
        let first = entry.waiting.is_empty();
        entry.waiting.push_back((approval, question.clone()));
        if !first {
            return;
        }
        let update = status_update(&entry.task, TaskState::InputRequired, Some(&question));
        apply_status(&mut entry.task, &update);
        if let Some(running) = &entry.running {
            let _ = running.events.send(StreamResponse::StatusUpdate(update));
        }
    }

    /// The task's agent is paused by a spent budget (`budget`, in words): the task asks its
    /// caller to wait for the operator — a caller cannot raise the operator's budget.
    pub(super) fn pause(&self, id: &str, agent: &str, budget: String) {
        let mut inner = lock(&self.inner);
        let Some(entry) = inner.tasks.get_mut(id) else {
            return;
        };
        let question = format!(
            "`{agent}` is paused by {budget}: only its operator can raise that budget (the team's budget raise, or its live view); the task goes on when they do, and fails if the pause runs out. A reply here cannot raise it."
        );
        entry.paused = Some(format!("`{agent}` is still paused by {budget}"));
        if !entry.waiting.is_empty() {
            return;
        }
        let update = status_update(&entry.task, TaskState::InputRequired, Some(&question));
        apply_status(&mut entry.task, &update);
        if let Some(running) = &entry.running {
            let _ = running.events.send(StreamResponse::StatusUpdate(update));
        }
    }

    /// The task's agent went on after a budget pause (the operator raised it): it works again.
    pub(super) fn resume(&self, id: &str) {
        let mut inner = lock(&self.inner);
        let Some(entry) = inner.tasks.get_mut(id) else {
            return;
        };
        if entry.paused.take().is_none() || !entry.waiting.is_empty() {
            return;
        }
        let update = status_update(&entry.task, TaskState::Working, None);
        apply_status(&mut entry.task, &update);
        if let Some(running) = &entry.running {
            let _ = running.events.send(StreamResponse::StatusUpdate(update));
        }
    }

    /// The task `id` of `agent`, with at most `history` of its last messages.
    pub(crate) fn get(&self, agent: &str, id: &str, history: Option<i32>) -> Option<Task> {
        let inner = lock(&self.inner);
        let entry = inner.tasks.get(id).filter(|e| e.agent == agent)?;
        Some(trim_history(entry.task.clone(), history))
    }

    /// Subscribe to a running task: its state now and its events from now.
    pub(crate) fn subscribe(
        &self,
        agent: &str,
        id: &str,
    ) -> Result<(Task, broadcast::Receiver<StreamResponse>), TaskRefusal> {
        let inner = lock(&self.inner);
        let entry = inner
            .tasks
            .get(id)
            .filter(|e| e.agent == agent)
            .ok_or(TaskRefusal::NotFound)?;
        match &entry.running {
            Some(running) => Ok((entry.task.clone(), running.events.subscribe())),
            None => Err(TaskRefusal::Finished(entry.task.status.state)),
        }
    }

    /// Cancel a running task; its state once cancelled.
    pub(crate) async fn cancel(&self, agent: &str, id: &str) -> Result<Task, TaskRefusal> {
        let (cancel, mut events) = {
            let mut inner = lock(&self.inner);
            let entry = inner
                .tasks
                .get_mut(id)
                .filter(|e| e.agent == agent)
                .ok_or(TaskRefusal::NotFound)?;
            let state = entry.task.status.state;
            let Some(running) = entry.running.as_mut() else {
                return Err(TaskRefusal::Finished(state));
            };
            (running.cancel.take(), running.events.subscribe())
        };
        if let Some(cancel) = cancel {
            let _ = cancel.send(());
        }
        // The worker ends the task (cancelled, or finished first) and closes its events.
        while let Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) = events.recv().await {}
        self.get(agent, id, None).ok_or(TaskRefusal::NotFound)
    }

    /// `agent`'s tasks, newest first, filtered, one page.
    pub(crate) fn list(
        &self,
        agent: &str,
        context_id: Option<&str>,
        state: Option<TaskState>,
        offset: usize,
        page_size: usize,
        include_artifacts: bool,
    ) -> (Vec<Task>, usize) {
        let inner = lock(&self.inner);
        let mut matching: Vec<&Entry> = inner
            .tasks
            .values()
            .filter(|e| e.agent == agent)
            .filter(|e| context_id.is_none_or(|c| e.task.context_id == c))
            .filter(|e| state.is_none_or(|s| e.task.status.state == s))
            .collect();
        matching.sort_by_key(|e| std::cmp::Reverse(e.seq));
        let total = matching.len();
        let page = matching
            .into_iter()
            .skip(offset)
            .take(page_size)
            .map(|e| {
                let mut task = e.task.clone();
                if !include_artifacts {
                    task.artifacts.clear();
                }
                task
            })
            .collect();
        (page, total)
    }

    /// Change a task and tell its streams, in one step (a subscriber sees the task before or
    /// after an event, never in between).
    pub(super) fn update(
        &self,
        id: &str,
        change: impl FnOnce(&mut Task) -> Option<StreamResponse>,
    ) {
        let mut inner = lock(&self.inner);
        let Some(entry) = inner.tasks.get_mut(id) else {
            return;
        };
        if let Some(event) = change(&mut entry.task)
            && let Some(running) = &entry.running
        {
            // No subscriber is fine: the task is kept for GetTask.
            let _ = running.events.send(event);
        }
    }

    /// The task is over: its events close.
    pub(super) fn finish(&self, id: &str) {
        let finished = {
            let mut inner = lock(&self.inner);
            let Some(entry) = inner.tasks.get_mut(id) else {
                return;
            };
            entry.running = None;
            entry.waiting.clear();
            entry.paused = None;
            (entry.agent.clone(), entry.task.clone())
        };
        if let Some(journal) = &self.journal {
            journal.record(&finished.0, &finished.1);
        }
    }
}

/// A caller's reply to a task its agent's budget paused: kept in the history, answered that only
/// the operator can raise the budget; the task stays `input-required`.
fn still_paused(
    entry: &mut Entry,
    paused: String,
    message: Message,
) -> (Task, broadcast::Receiver<StreamResponse>) {
    let (events, receiver) = match &entry.running {
        Some(running) => (Some(running.events.clone()), running.events.subscribe()),
        // Not reached: a paused task runs. A closed channel ends the caller's wait at once.
        None => (None, broadcast::channel(1).1),
    };
    entry.task.history.push(message);
    let told = format!("{paused}; the operator must raise it (a reply here cannot)");
    let update = status_update(&entry.task, TaskState::InputRequired, Some(&told));
    apply_status(&mut entry.task, &update);
    if let Some(events) = events {
        let _ = events.send(StreamResponse::StatusUpdate(update));
    }
    (entry.task.clone(), receiver)
}

/// A status update of `task` to `state`, with the agent's `text`.
pub(super) fn status_update(
    task: &Task,
    state: TaskState,
    text: Option<&str>,
) -> TaskStatusUpdateEvent {
    let message = text.map(|t| Message {
        context_id: Some(task.context_id.clone()),
        task_id: Some(task.id.clone()),
        ..Message::text(Role::Agent, t)
    });
    TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: TaskStatus {
            state,
            message,
            timestamp: Some(now()),
        },
    }
}

/// `update` applied to its task: the status, and its message in the history.
pub(super) fn apply_status(task: &mut Task, update: &TaskStatusUpdateEvent) {
    task.status = update.status.clone();
    if let Some(message) = &update.status.message {
        task.history.push(message.clone());
    }
}

/// Drop the oldest finished tasks past [`MAX_TASKS`] (running ones are never dropped).
fn evict(inner: &mut Inner) {
    if inner.tasks.len() <= MAX_TASKS {
        return;
    }
    let mut finished: Vec<(u64, String)> = inner
        .tasks
        .iter()
        .filter(|(_, e)| e.running.is_none())
        .map(|(id, e)| (e.seq, id.clone()))
        .collect();
    finished.sort();
    let excess = inner.tasks.len() - MAX_TASKS;
    for (_, id) in finished.into_iter().take(excess) {
        inner.tasks.remove(&id);
    }
}

fn trim_history(mut task: Task, history: Option<i32>) -> Task {
    if let Some(keep) = history.and_then(|h| usize::try_from(h).ok()) {
        let drop = task.history.len().saturating_sub(keep);
        task.history.drain(..drop);
    }
    task
}
