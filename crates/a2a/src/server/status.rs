//! A task's status as its events and history carry it: the update that moves it, applied; its
//! history trimmed to what a caller asked for (`historyLength`).

use crate::server::timestamp::now;
use crate::wire::{Message, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};

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

/// `task` with at most `history` of its last messages (all when `None`).
pub(super) fn trim_history(mut task: Task, history: Option<i32>) -> Task {
    if let Some(keep) = history.and_then(|h| usize::try_from(h).ok()) {
        let drop = task.history.len().saturating_sub(keep);
        task.history.drain(..drop);
    }
    task
}
