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
use crate::server::status::{apply_status, status_update, trim_history};
use crate::server::tasks_file::{TaskLine, TasksFile};
use crate::server::timestamp::now;
use crate::server::worker::Worker;
use crate::wire::{Message, StreamResponse, Task, TaskState, TaskStatus};

/// How the server asks the team's agents: `Team::stream_asker`, the team's one ask road.
pub(crate) type Asker = Arc<dyn Fn(&str, AgentRequest) -> AskStream + Send + Sync>;

/// How many tasks the server keeps.
pub(crate) const MAX_TASKS: usize = 1000;
/// How much of finished tasks the server keeps (as their lines in the tasks file measure them): a caller
/// sending megabytes per task cannot make it hold gigabytes.
pub(crate) const MAX_KEPT_BYTES: u64 = 64 << 20;
/// How many events a streaming caller may fall behind.
pub(crate) const EVENT_ROOM: usize = 1024;

struct Entry {
    agent: String,
    /// Who started it ([`ServerAuth`](super::ServerAuth)'s caller): no one else reaches it.
    caller: String,
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
    /// Once finished: the size of its line in the tasks file, what it counts against
    /// [`MAX_KEPT_BYTES`].
    bytes: u64,
}

struct Running {
    events: broadcast::Sender<StreamResponse>,
    cancel: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    next_seq: u64,
    /// The finished tasks kept: how many, and their bytes.
    finished: usize,
    finished_bytes: u64,
}

/// Why a task operation was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TaskRefusal {
    /// No such task of this agent and caller (another caller's is not told apart from none).
    NotFound,
    /// The message names another context than its task's.
    ContextMismatch,
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
    /// Where finished tasks are kept across restarts (`--tasks FILE`), if anywhere. Taken
    /// before `inner` when both are: a task is marked finished and written in one step.
    tasks_file: Option<Arc<Mutex<TasksFile>>>,
    /// The agent each context is asked through.
    conversations: Arc<Conversations>,
}

impl TaskStore {
    /// The tasks of a team with this approval desk.
    pub(crate) fn new(
        approvals: Approvals,
        tasks_file: Option<(TasksFile, Vec<(TaskLine, u64)>)>,
        conversations: Conversations,
    ) -> Self {
        let mut inner = Inner::default();
        let tasks_file = tasks_file.map(|(mut file, restored)| {
            for (line, bytes) in restored {
                // A served behaviour's one conversation outlives the restart with its tasks.
                // A line written before tasks had callers belongs to none: no caller reaches it.
                let caller = line.caller.unwrap_or_default();
                let _ = conversations.bind_shared(&line.agent, &caller, &line.task.context_id);
                inner.next_seq += 1;
                let entry = Entry {
                    agent: line.agent,
                    caller,
                    task: line.task,
                    seq: inner.next_seq,
                    running: None,
                    waiting: VecDeque::new(),
                    paused: None,
                    bytes,
                };
                inner.finished += 1;
                inner.finished_bytes += bytes;
                // A tasks fileed twice (a rewrite cut short) counts once: the later line.
                if let Some(old) = inner.tasks.insert(entry.task.id.clone(), entry) {
                    inner.finished -= 1;
                    inner.finished_bytes -= old.bytes;
                }
            }
            evict(&mut inner);
            // Rewritten with what is kept: the file starts within the store's bounds.
            file.rewrite(finished_lines(&inner).iter().map(String::as_str));
            Arc::new(Mutex::new(file))
        });
        TaskStore {
            inner: Arc::new(Mutex::new(inner)),
            approvals,
            tasks_file,
            conversations: Arc::new(conversations),
        }
    }

    /// Start a task for `caller` of `agent` on `message`: the task as created, and its events
    /// from the start. `task_id` continues a task (it must be this agent's and this caller's,
    /// not finished, and in the message's context when it names one). A new task is asked of
    /// its context's own conversation ([`Conversations`]), the caller's own: another caller's
    /// context of the same id is another conversation.
    pub(crate) async fn start(
        &self,
        ask: &Asker,
        (agent, caller): (&str, &str),
        message: Message,
        trace: TraceContext,
    ) -> Result<(Task, broadcast::Receiver<StreamResponse>), TaskRefusal> {
        let text = message.text_content();
        if let Some(id) = &message.task_id {
            let mut inner = lock(&self.inner);
            let entry = inner
                .tasks
                .get_mut(id)
                .filter(|e| e.agent == agent && e.caller == caller)
                .ok_or(TaskRefusal::NotFound)?;
            if message
                .context_id
                .as_ref()
                .is_some_and(|c| *c != entry.task.context_id)
            {
                return Err(TaskRefusal::ContextMismatch);
            }
            return self.answer(entry, message);
        }
        let context_id = message.context_id.clone().unwrap_or_else(new_id);
        let known = message.context_id.is_some()
            && lock(&self.inner)
                .tasks
                .values()
                .any(|e| e.agent == agent && e.caller == caller && e.task.context_id == context_id);
        let lease = self
            .conversations
            .lease(agent, caller, &context_id, known)
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
                    caller: caller.to_string(),
                    task: task.clone(),
                    seq,
                    running: Some(Running {
                        events,
                        cancel: Some(cancel),
                    }),
                    waiting: VecDeque::new(),
                    paused: None,
                    bytes: 0,
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
            request_id: None,
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
                Some(budget) => Ok(still_paused(entry, budget.clone())),
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

    /// The task `id` of `agent` and `caller`, with at most `history` of its last messages.
    pub(crate) fn get(
        &self,
        (agent, caller): (&str, &str),
        id: &str,
        history: Option<i32>,
    ) -> Option<Task> {
        let inner = lock(&self.inner);
        let entry = inner
            .tasks
            .get(id)
            .filter(|e| e.agent == agent && e.caller == caller)?;
        Some(trim_history(entry.task.clone(), history))
    }

    /// Subscribe to a running task: its state now and its events from now.
    pub(crate) fn subscribe(
        &self,
        (agent, caller): (&str, &str),
        id: &str,
    ) -> Result<(Task, broadcast::Receiver<StreamResponse>), TaskRefusal> {
        let inner = lock(&self.inner);
        let entry = inner
            .tasks
            .get(id)
            .filter(|e| e.agent == agent && e.caller == caller)
            .ok_or(TaskRefusal::NotFound)?;
        match &entry.running {
            Some(running) => Ok((entry.task.clone(), running.events.subscribe())),
            None => Err(TaskRefusal::Finished(entry.task.status.state)),
        }
    }

    /// A stream's task as it is now, and (while it runs) its events from now on, in one step:
    /// what a stream that fell behind is caught up with.
    pub(crate) fn catch_up(
        &self,
        (agent, caller): (&str, &str),
        id: &str,
    ) -> Option<(Task, Option<broadcast::Receiver<StreamResponse>>)> {
        let inner = lock(&self.inner);
        let entry = inner
            .tasks
            .get(id)
            .filter(|e| e.agent == agent && e.caller == caller)?;
        let events = entry.running.as_ref().map(|r| r.events.subscribe());
        Some((entry.task.clone(), events))
    }

    /// Cancel a running task; its state once cancelled.
    pub(crate) async fn cancel(
        &self,
        (agent, caller): (&str, &str),
        id: &str,
    ) -> Result<Task, TaskRefusal> {
        let (cancel, mut events) = {
            let mut inner = lock(&self.inner);
            let entry = inner
                .tasks
                .get_mut(id)
                .filter(|e| e.agent == agent && e.caller == caller)
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
        self.get((agent, caller), id, None)
            .ok_or(TaskRefusal::NotFound)
    }

    /// `caller`'s tasks of `agent`, newest first, filtered, one page.
    pub(crate) fn list(
        &self,
        (agent, caller): (&str, &str),
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
            .filter(|e| e.agent == agent && e.caller == caller)
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

    /// The task is over: `end` gives it its final state, it is written to the tasks file
    /// (rewritten with what the store keeps when it has outgrown it), it counts against the
    /// store's bounds, and only then does its last event (`end`'s) go out and its events close:
    /// a caller told the task ended finds it so after a restart too, and a reader of the store
    /// never sees the final state before it is on disk.
    pub(super) fn finish(&self, id: &str, end: impl FnOnce(&mut Task) -> StreamResponse) {
        let mut file = self.tasks_file.as_ref().map(|f| lock(f));
        let mut inner = lock(&self.inner);
        let Some(entry) = inner.tasks.get_mut(id) else {
            return;
        };
        let Some(running) = entry.running.take() else {
            return;
        };
        let last = end(&mut entry.task);
        entry.waiting.clear();
        entry.paused = None;
        let line = TaskLine {
            agent: entry.agent.clone(),
            caller: Some(entry.caller.clone()),
            task: entry.task.clone(),
        }
        .text();
        entry.bytes = line.len() as u64 + 1;
        let bytes = entry.bytes;
        inner.finished += 1;
        inner.finished_bytes += bytes;
        evict(&mut inner);
        if let Some(file) = file.as_mut() {
            if inner.tasks.contains_key(id) {
                file.record(&line);
            }
            if file.outgrown(inner.finished, inner.finished_bytes) {
                let lines = finished_lines(&inner);
                file.rewrite(lines.iter().map(String::as_str));
            }
        }
        drop(inner);
        // No subscriber is fine: the task is kept for GetTask.
        let _ = running.events.send(last);
    }
}

/// A caller's reply to a task its agent's budget paused: answered that only the operator can
/// raise the budget; the task stays `input-required`. Neither the reply (which reaches no one:
/// the agent waits on the operator) nor the answer to it is added to the history, so replies
/// cost the task nothing however many and however large they are, and the caller gets back
/// the task as it was with the answer as its status.
fn still_paused(entry: &mut Entry, paused: String) -> (Task, broadcast::Receiver<StreamResponse>) {
    let (events, receiver) = match &entry.running {
        Some(running) => (Some(running.events.clone()), running.events.subscribe()),
        // Not reached: a paused task runs. A closed channel ends the caller's wait at once.
        None => (None, broadcast::channel(1).1),
    };
    let told = format!("{paused}; the operator must raise it (a reply here cannot)");
    let update = status_update(&entry.task, TaskState::InputRequired, Some(&told));
    entry.task.status = update.status.clone();
    if let Some(events) = events {
        let _ = events.send(StreamResponse::StatusUpdate(update));
    }
    (entry.task.clone(), receiver)
}

/// Drop the oldest finished tasks past [`MAX_TASKS`] in all or [`MAX_KEPT_BYTES`] of finished
/// ones (running ones are never dropped: their number is bounded by the live conversations).
fn evict(inner: &mut Inner) {
    if inner.tasks.len() <= MAX_TASKS && inner.finished_bytes <= MAX_KEPT_BYTES {
        return;
    }
    let mut finished: Vec<(u64, String)> = inner
        .tasks
        .iter()
        .filter(|(_, e)| e.running.is_none())
        .map(|(id, e)| (e.seq, id.clone()))
        .collect();
    finished.sort();
    for (_, id) in finished {
        if inner.tasks.len() <= MAX_TASKS && inner.finished_bytes <= MAX_KEPT_BYTES {
            break;
        }
        if let Some(gone) = inner.tasks.remove(&id) {
            inner.finished -= 1;
            inner.finished_bytes -= gone.bytes;
        }
    }
}

/// The finished tasks' lines in the tasks file, oldest first.
fn finished_lines(inner: &Inner) -> Vec<String> {
    let mut finished: Vec<&Entry> = inner
        .tasks
        .values()
        .filter(|e| e.running.is_none())
        .collect();
    finished.sort_by_key(|e| e.seq);
    finished
        .into_iter()
        .map(|e| {
            TaskLine {
                agent: e.agent.clone(),
                caller: Some(e.caller.clone()),
                task: e.task.clone(),
            }
            .text()
        })
        .collect()
}
