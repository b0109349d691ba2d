//! troupe-session: each agent's conversation as an append-only JSONL log that survives a killed
//! process.
//!
//! A log is a sequence of [`SessionRecord`]s, one JSON object per line. Records are queued with
//! [`SessionLog::append`] and written by [`SessionLog::flush`] — at a commit point — followed by
//! a `{"type":"commit"}` line and an fsync: one commit. Loading applies only committed records,
//! so a process killed in the middle of writing a commit loses that commit and nothing else:
//!
//! - an unterminated last line (the write was cut off) is skipped with a warning — unless it is
//!   a whole commit line that lost only its newline, which completes its commit;
//! - complete records after the last commit line (an unfinished commit) are dropped with a warning;
//! - any other damage — a complete line that is not a record, or committed records that do not
//!   form a valid conversation (a tool result answering no open call, a call left without a
//!   result, a repeated message id) — is an error naming the line, and the file is left alone.
//!
//! One log has one writer: [`SessionLog::open`] takes an exclusive lock ([`SessionLock`], an
//! `flock` on the log file itself, whatever name it is reached by; the sidecar `<log>.lock` names
//! the holder's pid) for as long as the log is open, so a second process — through the same
//! path, a symbolic link or a hard link — gets "session … is in use by process N" instead of
//! interleaving commits. Only regular files are opened: a FIFO, a device or a directory is refused
//! before anything is read. Logs and their sidecars are created `0o600`.
//!
//! The agent that writes the log types the state recorded with its messages: the `FileLedger`,
//! the `ArchiveEntry`s and the `CompactionReport` of its compactions (a record of the wrong shape
//! is refused at its line). They are written as JSON values were (keys sorted), so a log keeps the
//! bytes of format 1 (`tests/fixtures/session_format_1.jsonl`).
//!
//! Format 2 commits a request step by step (durable steps: a `request_opened`, each model answer
//! with its usage, each tool result as it completes, the request's close; see
//! troupe-agents' `llm_agent/steps.rs`); a format 1 log holds whole requests and loads as before
//! (`tests/fixtures/session_format_1.jsonl`, `session_format_2.jsonl`). Every commit is a step
//! with an id ([`steps`]), and [`Session::fork`] writes a new log ending at one (time travel).
//!
//! Files: the records (`records.rs`), writing (`log.rs`), reading and replay
//! (`scan.rs`, `replay.rs`), steps and forks (`steps.rs`, `fork.rs`), the lock and file checks
//! (`lock.rs`, `files.rs`), behind the one interface of a [`SessionStore`] (`store.rs`); keeping an
//! an `LlmAgent`'s log in step with its conversation (`sync.rs`, under the agent's
//! `claim.rs`) and asking whether it is behind (`health.rs`).
//!
//! ```no_run
//! use troupe_session::SessionLog;
//! use troupe_protocol::ChatMessage;
//! # fn main() -> Result<(), troupe_session::SessionError> {
//! let (mut log, session) = SessionLog::open("chat.jsonl".as_ref())?;
//! for w in &session.warnings { eprintln!("warning: {w}"); }
//! let mut conversation = session.conversation;
//! let id = conversation.push(ChatMessage::user("hello"));
//! log.append_message(conversation.get(id).unwrap_or(&ChatMessage::user("hello")));
//! log.flush()?; // a commit: written and fsynced
//! # Ok(()) }
//! ```

mod claim;
mod error;
mod files;
mod fork;
mod health;
mod lock;
mod log;
mod postgres;
mod records;
mod replay;
mod scan;
mod steps;
mod store;
mod sync;
#[cfg(test)]
mod tests;

pub use claim::SessionClaim;
pub use error::SessionError;
pub use health::SessionBehind;
pub use lock::{SessionLock, lock_path};
pub use log::SessionLog;
pub use postgres::PostgresOptions;
pub use records::{
    CompactionRecord, HandledRequest, LoggedFormat, PausedCall, RequestOutcome,
    SESSION_FORMAT_VERSION, Session, SessionRecord,
};
pub use scan::load;
pub use steps::{Step, StepKind, steps};
pub use store::SessionStore;
pub use sync::{Restored, SessionSync, restore};
