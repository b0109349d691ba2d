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
    /// The pid note beside a log (`<log>.lock`) is not a file troupe may write: a symbolic link
    /// (writing it would write over what it points to), a file with other names (a hard link:
    /// the same), a FIFO, device or directory. Refused before anything is written to it.
    #[error(
        "session lock note {path} is {kind}, which troupe does not write through; remove it \
         (troupe makes its own)"
    )]
    UnsafeLockNote {
        /// The note.
        path: PathBuf,
        /// What it is ("a symbolic link", "a hard link", "a FIFO", …).
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
    /// Another owner's lease holds the log in a shared store (a store's claim of it is a lease:
    /// it is free again once released, or once it runs out unrenewed).
    #[error("session {path} is in use by {node}{}", lease_left(*.expires_in_ms))]
    Leased {
        /// The log.
        path: PathBuf,
        /// Who holds it, as it named itself.
        node: String,
        /// How long its lease runs unless renewed, in milliseconds (`None`: unknown).
        expires_in_ms: Option<u64>,
    },
    /// This writer's lease of the log was taken over by another owner, or found no longer its
    /// own: its commits are refused (fencing), so it never writes after its successor began.
    #[error(
        "session log {path}: this writer's lease (epoch {epoch}) is no longer held{}; its \
         commits are refused",
        taken_by(.by.as_ref())
    )]
    Fenced {
        /// The log.
        path: PathBuf,
        /// The epoch this writer held it with.
        epoch: u64,
        /// Who holds it now and with which epoch, when known.
        by: Option<(String, u64)>,
    },
    /// The store could not be reached, or answered with an error (its reason).
    #[error("session log {path}: the store {store}: {reason}")]
    Store {
        /// The log.
        path: PathBuf,
        /// The store, as it is shown (a Postgres URL without its password).
        store: String,
        /// What went wrong.
        reason: String,
    },
    /// A store could not be opened: no connection, or a schema it cannot use.
    #[error("cannot open the session store {store}: {reason}")]
    Connect {
        /// The store, as it is shown (a Postgres URL without its password).
        store: String,
        /// Why.
        reason: String,
    },
}

impl SessionError {
    /// Whether this writer may no longer write the log (another owner holds it now): the
    /// agent must stop, not retry.
    pub fn is_fenced(&self) -> bool {
        matches!(self, SessionError::Fenced { .. })
    }
}

/// How long a lease runs, in words.
fn lease_left(ms: Option<u64>) -> String {
    match ms {
        Some(ms) => format!(
            " (its lease runs out in {:.1} s unless renewed)",
            ms as f64 / 1000.0
        ),
        None => String::new(),
    }
}

/// Who took a lease over, in words.
fn taken_by(by: Option<&(String, u64)>) -> String {
    match by {
        Some((node, epoch)) => format!(" ({node} holds it with epoch {epoch})"),
        None => String::new(),
    }
}

/// Who holds a lock, in words.
fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(pid) if pid == std::process::id() => format!("process {pid} (this process)"),
        Some(pid) => format!("process {pid}"),
        None => "another process".to_string(),
    }
}
