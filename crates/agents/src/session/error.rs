//! [`SessionError`]: why a session log could not be opened, read or written.

use std::path::PathBuf;

/// Why a session log could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// An I/O error.
    #[error("session log {path}: {cause}")]
    Io {
        /// The log file.
        path: PathBuf,
        /// The failed operation's error.
        cause: std::io::Error,
    },
    /// A complete line that is not a session record, or holds agent state (ledger, archive entry,
    /// report) of another shape than the agent's: the log is damaged.
    #[error("session log {path}:{line}: corrupt record: {reason}")]
    Corrupt {
        /// The log.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The committed records parse, but do not form a conversation a provider would accept (a
    /// tool result that answers no open call, a call left without a result, a repeated message
    /// id): the log was damaged or written by two processes at once.
    #[error("session log {path}:{line}: invalid conversation: {reason}")]
    Invalid {
        /// The log.
        path: PathBuf,
        /// 1-based line number of the record at fault.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A record could not be serialized (the reason names its `type`); nothing of the turn was
    /// written. Kept for serde's `Result`: the typed records leave it no known cause.
    #[error("session log {path}: cannot serialize a record: {reason}")]
    Serialize {
        /// The log file.
        path: PathBuf,
        /// Which record, and serde's message.
        reason: String,
    },
    /// The path is a FIFO, a device, a directory…: refused before anything is read from it.
    #[error("session log {path} is not a regular file (it is {kind})")]
    NotRegularFile {
        /// The log.
        path: PathBuf,
        /// What it is instead ("a directory", "a FIFO", …).
        kind: &'static str,
    },
    /// A fork was asked for a step the log does not have (`troupe session show` lists them).
    #[error(
        "session log {path} has no step {step} (its steps are 0 to {}; `troupe session show` lists them)",
        .steps.saturating_sub(1)
    )]
    UnknownStep {
        /// The log.
        path: PathBuf,
        /// The step asked for, as given.
        step: String,
        /// How many steps the log has.
        steps: usize,
    },
    /// A fork's new log would replace a log that exists.
    #[error("session log {path} exists already; a fork writes a new log")]
    Exists {
        /// The existing log.
        path: PathBuf,
    },
    /// Another open log holds the session's lock: another process, or another owner in this
    /// one.
    #[error("session {path} is in use by {}", holder(*.pid))]
    InUse {
        /// The log.
        path: PathBuf,
        /// The holder's process id, as it recorded it in the lock file (`None` when unreadable).
        pid: Option<u32>,
    },
}

/// Who holds a lock, in words.
fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(pid) if pid == std::process::id() => format!("process {pid} (this process)"),
        Some(pid) => format!("process {pid}"),
        None => "another process".to_string(),
    }
}
