//! Whether an agent's session log is in step with its conversation: [`SessionBehind`], and the
//! [`SessionHealth`] job that asks.

use std::path::PathBuf;

use troupe_runtime::{AskError, Job, Team, TraceContext};

/// An agent's session log is behind its conversation: its last writes failed (a full disk, a
/// file size limit, a log that went away), so what happened since its last successful write
/// would be lost with the process. The agent writes the whole difference again at its next turn
/// boundary; one that succeeds catches the log up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error} ({unsaved} turn boundaries not saved)")]
pub struct SessionBehind {
    /// The log.
    pub path: PathBuf,
    /// Why the last write failed.
    pub error: String,
    /// Turn boundaries (requests answered, compactions, closed scopes) whose write failed since
    /// the last successful one.
    pub unsaved: usize,
}

/// Ask an agent whether its session log is behind ([`session_health`]): `None` when it is in
/// step (or the agent keeps no log).
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionHealth;

impl Job for SessionHealth {
    type Reply = Option<SessionBehind>;
}

/// Whether `agent`'s session log is behind its conversation, and since how many turn
/// boundaries (see [`SessionBehind`]). Ask after a turn or a compaction: a failed write is then
/// known at once, not only from a log line.
///
/// # Errors
/// [`AskError`] when the agent cannot be reached.
pub async fn session_health(team: &Team, agent: &str) -> Result<Option<SessionBehind>, AskError> {
    team.directory()
        .ask_job(
            agent,
            SessionHealth,
            TraceContext::new_root(),
            crate::COMPACTION_TIMEOUT,
        )
        .await
}
