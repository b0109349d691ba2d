//! Whether an agent's session log is in step with its conversation: [`SessionBehind`] (asked
//! with `LlmAgentHandle::session_health`).

use std::path::PathBuf;

/// An agent's session log is behind its conversation: its last writes failed (a full disk, a
/// file size limit, a log that went away), so what happened since its last successful write
/// would be lost with the process. The agent writes the whole difference again at its next
/// commit point; a write that succeeds catches the log up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error} ({unsaved} commits not saved)")]
pub struct SessionBehind {
    /// The log.
    pub path: PathBuf,
    /// Why the last write failed.
    pub error: String,
    /// Commit points (requests answered or failed, compactions, closed scopes) whose write
    /// failed since the last successful one.
    pub unsaved: usize,
}
