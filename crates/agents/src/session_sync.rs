//! Keeping an [`crate::LlmAgent`]'s session log in step with its conversation.
//!
//! An agent given a session path ([`crate::AgentSpec::session`]) opens the log when it is built
//! and, at every turn boundary (a request answered or failed, a compaction or scope closed),
//! writes what changed since the last boundary as one committed, fsynced turn:
//!
//! - messages appended since then, as `message` records;
//! - a history that no longer extends the logged one (a compaction, a closed scope), as one
//!   `compaction` record holding the whole new conversation, the summary, the new archive entries,
//!   the file lists and the compaction report;
//! - the file ledger, when it changed;
//! - the model, when the agent opens the log with a different one than it last recorded.
//!
//! A killed process therefore loses at most the turn in flight; [`restore`] rebuilds the
//! conversation, ledger, archive and last compaction report from the log.

use std::path::Path;

use serde_json::Value;
use troupe_compaction::{Archive, ArchiveEntry, CompactionReport};
use troupe_runtime::session::{CompactionRecord, Session, SessionError, SessionLog, SessionRecord};
use troupe_runtime::{ChatMessage, Conversation, MessageKind, StoredMessage};
use troupe_tools::FileLedger;

/// What an agent resumes with.
pub(crate) struct Restored {
    pub(crate) conversation: Conversation,
    pub(crate) ledger: FileLedger,
    pub(crate) archive: Archive,
    pub(crate) last_compaction: Option<CompactionReport>,
}

/// Why a log's contents cannot be turned back into agent state.
fn corrupt(path: &Path, what: &str, e: &serde_json::Error) -> SessionError {
    SessionError::State {
        path: path.to_path_buf(),
        reason: format!("the recorded {what} does not parse: {e}"),
    }
}

/// The agent state a session describes.
///
/// # Errors
/// [`SessionError::State`] when the ledger, an archive entry or the report recorded in the log
/// is not of the expected shape.
pub(crate) fn restore(path: &Path, session: &Session) -> Result<Restored, SessionError> {
    let ledger = match &session.ledger {
        Some(v) => {
            serde_json::from_value(v.clone()).map_err(|e| corrupt(path, "file ledger", &e))?
        }
        None => FileLedger::default(),
    };
    let archive: Archive = serde_json::from_value(Value::Array(session.archive_entries.clone()))
        .map_err(|e| corrupt(path, "archive", &e))?;
    let last_compaction = match &session.last_report {
        Some(v) => Some(
            serde_json::from_value(v.clone())
                .map_err(|e| corrupt(path, "compaction report", &e))?,
        ),
        None => None,
    };
    Ok(Restored {
        conversation: session.conversation.clone(),
        ledger,
        archive,
        last_compaction,
    })
}

/// An open log and what of the agent's state it already holds.
pub(crate) struct SessionSync {
    log: SessionLog,
    persisted: Vec<ChatMessage>,
    archive_persisted: usize,
    ledger_persisted: Option<Value>,
}

impl std::fmt::Debug for SessionSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionSync")
            .field("path", &self.log.path())
            .field("persisted", &self.persisted.len())
            .finish()
    }
}

impl SessionSync {
    /// Open (or create) the log at `path` for `agent`; returns the session it holds. An unfinished
    /// tail is cut off and reported in the session's warnings.
    ///
    /// # Errors
    /// As [`SessionLog::open_for`].
    pub(crate) fn open(path: &Path, agent: &str) -> Result<(SessionSync, Session), SessionError> {
        let (log, session) = SessionLog::open_for(path, Some(agent))?;
        let sync = SessionSync {
            log,
            persisted: session.conversation.messages().to_vec(),
            archive_persisted: session.archive_entries.len(),
            ledger_persisted: session.ledger.clone(),
        };
        Ok((sync, session))
    }

    /// Record `model` as a `model_change` when the log last named another one (or none).
    ///
    /// # Errors
    /// [`SessionError`] when writing fails.
    pub(crate) fn note_model(
        &mut self,
        logged: Option<&str>,
        model: &str,
    ) -> Result<(), SessionError> {
        if logged == Some(model) {
            return Ok(());
        }
        self.log.append(SessionRecord::ModelChange {
            model: model.to_string(),
        });
        self.log.flush().inspect_err(|_| self.log.discard_pending())
    }

    /// The log's path.
    pub(crate) fn path(&self) -> &Path {
        self.log.path()
    }

    /// Write what changed since the last boundary as one committed turn (nothing when nothing
    /// changed).
    ///
    /// # Errors
    /// [`SessionError`] when writing fails; nothing counts as persisted then, so the next call
    /// writes the whole difference again.
    pub(crate) fn persist(
        &mut self,
        conversation: &Conversation,
        archive: &Archive,
        ledger: &FileLedger,
        report: Option<&CompactionReport>,
    ) -> Result<(), SessionError> {
        let now = conversation.messages();
        let extends =
            now.len() >= self.persisted.len() && now[..self.persisted.len()] == self.persisted[..];
        let ledger_value = if ledger.is_empty() {
            None
        } else {
            serde_json::to_value(ledger).ok()
        };
        let fresh: &[ArchiveEntry] = archive
            .entries()
            .get(self.archive_persisted..)
            .unwrap_or_default();
        // New archive entries mean the history was rewritten, even if it still looks extended.
        if extends && fresh.is_empty() {
            for m in &now[self.persisted.len()..] {
                self.log.append_message(m);
            }
        } else {
            let summary = now
                .iter()
                .rev()
                .find(|m| m.kind == MessageKind::Summary)
                .map(ChatMessage::text);
            self.log.append(SessionRecord::Compaction(CompactionRecord {
                messages: now.iter().map(StoredMessage::from).collect(),
                summary,
                read_files: ledger.read_only_files().into_iter().collect(),
                modified_files: ledger.modified_files().into_iter().collect(),
                archived: fresh.iter().map(|e| e.original.id).collect(),
                archive_entries: fresh
                    .iter()
                    .filter_map(|e| serde_json::to_value(e).ok())
                    .collect(),
                ledger: ledger_value.clone(),
                report: report.and_then(|r| serde_json::to_value(r).ok()),
            }));
        }
        if ledger_value != self.ledger_persisted
            && let Some(l) = &ledger_value
        {
            self.log.append(SessionRecord::Ledger { ledger: l.clone() });
        }
        if let Err(e) = self.log.flush() {
            self.log.discard_pending();
            return Err(e);
        }
        self.persisted = now.to_vec();
        self.archive_persisted = archive.len();
        self.ledger_persisted = ledger_value;
        Ok(())
    }
}
