//! Keeping an `LlmAgent`'s session log in step with its conversation.
//!
//! An agent given a session path (`AgentSpec::session`) opens the log when it is built
//! and, at every commit point (a request answered or failed, a compaction or scope closed),
//! writes what changed since the last one as one commit (records, a `commit` line, an fsync):
//!
//! - messages appended since then, as `message` records;
//! - a history that no longer extends the logged one (a compaction, a closed scope), as one
//!   `compaction` record holding the whole new conversation, the summary, the new archive entries,
//!   the file lists and the compaction report;
//! - the file ledger, when it changed;
//! - the model, when the agent opens the log with a different one than it last recorded.
//!
//! A killed process therefore loses at most the request in flight; [`restore`] rebuilds the
//! conversation, ledger, archive and last compaction report from the log.
//!
//! The records are typed ([`SessionRecord`]): a ledger, archive entry or report of the wrong
//! shape is refused at its line when the log is read.
//!
//! The log's lock belongs to whoever owns the agent for its whole life ([`SessionClaim`]).

use std::path::Path;
use std::sync::Arc;

use troupe_compaction::{Archive, ArchiveEntry};
use troupe_protocol::CompactionReport;
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, Conversation, MessageKind, StoredMessage};

use super::claim::SessionClaim;
use super::error::SessionError;
use super::health::SessionBehind;
use super::records::{CompactionRecord, PausedCall, RequestOutcome, Session, SessionRecord};
use super::store::CommitLog;

/// What an agent resumes with.
pub struct Restored {
    /// The conversation as of the last commit.
    pub conversation: Conversation,
    /// The latest file ledger.
    pub ledger: FileLedger,
    /// Every archive entry recorded.
    pub archive: Archive,
    /// The report of the latest compaction.
    pub last_compaction: Option<CompactionReport>,
    /// The calls of a turn paused for approval that never finished.
    pub paused: Vec<PausedCall>,
}

/// The agent state a session describes.
pub fn restore(session: &Session) -> Restored {
    Restored {
        conversation: session.conversation.clone(),
        ledger: session.ledger.clone().unwrap_or_default(),
        archive: Archive::from(session.archive_entries.clone()),
        last_compaction: session.last_report.clone(),
        paused: session.paused.clone(),
    }
}

/// Append and flush a `model_change` to `model` when the log last named another one (or none);
/// a failed write leaves nothing pending.
fn record_model(
    log: &mut dyn CommitLog,
    logged: Option<&str>,
    model: &str,
) -> Result<(), SessionError> {
    if logged == Some(model) {
        return Ok(());
    }
    log.append(SessionRecord::ModelChange {
        model: model.to_string(),
    });
    log.flush().inspect_err(|_| log.discard_pending())
}

/// An open log and what of the agent's state it already holds.
pub struct SessionSync {
    log: Box<dyn CommitLog>,
    /// The claim on the log: the factory's (shared by every build of the agent) or, for an
    /// agent built without one, its own.
    claim: SessionClaim,
    persisted: Vec<Arc<ChatMessage>>,
    archive_persisted: usize,
    ledger_persisted: Option<FileLedger>,
    /// Set while the log is behind: the last write failed.
    behind: Option<SessionBehind>,
    /// Past every message id the log holds: a rolled-back request's ids were logged (durable
    /// steps), and a log never takes an id twice.
    next_id: u64,
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
    /// Open (or create) the log at `path` for `agent` under `claim` (a claim of its own when
    /// `None`); returns the session it holds. An unfinished tail is cut off and reported in the
    /// session's warnings.
    ///
    /// # Errors
    /// As [`crate::SessionLog::open_for`]; [`SessionError::InUse`] when another owner holds the
    /// log.
    pub fn open(
        path: &Path,
        agent: &str,
        claim: Option<&SessionClaim>,
    ) -> Result<(SessionSync, Session), SessionError> {
        let claim = claim.cloned().unwrap_or_default();
        let (log, session) = claim.open(path, agent)?;
        let sync = SessionSync {
            log,
            claim,
            persisted: session.conversation.messages().to_vec(),
            archive_persisted: session.archive_entries.len(),
            ledger_persisted: session.ledger.clone(),
            behind: None,
            next_id: session.conversation.next_id().0,
        };
        Ok((sync, session))
    }

    /// Record `model` as a `model_change` when the log last named another one (or none).
    ///
    /// # Errors
    /// [`SessionError`] when writing fails.
    pub fn note_model(&mut self, logged: Option<&str>, model: &str) -> Result<(), SessionError> {
        record_model(self.log.as_mut(), logged, model)
    }

    /// Continue from the log at `path` (see `LlmAgentJob::SwitchSession`): open it
    /// under this sync's claim, record `model` in it, and return the sync that keeps it with the
    /// session it holds. On an error this sync, its log and its claim are unchanged.
    ///
    /// # Errors
    /// As [`SessionSync::open`], and [`SessionError`] when the model change cannot be written.
    pub fn switch(
        &self,
        path: &Path,
        agent: &str,
        model: &str,
    ) -> Result<(SessionSync, Session), SessionError> {
        let (log, session) = self.claim.switch(path, agent, |log, session| {
            record_model(log, session.model.as_deref(), model)
        })?;
        let sync = SessionSync {
            log,
            claim: self.claim.clone(),
            persisted: session.conversation.messages().to_vec(),
            archive_persisted: session.archive_entries.len(),
            ledger_persisted: session.ledger.clone(),
            behind: None,
            next_id: session.conversation.next_id().0,
        };
        Ok((sync, session))
    }

    /// Record a fresh start (`/clear`) as one commit: loading forgets everything before
    /// it but the archive.
    ///
    /// # Errors
    /// [`SessionError`] when writing fails; nothing is written then.
    pub fn clear(&mut self) -> Result<(), SessionError> {
        self.log.append(SessionRecord::Clear);
        if let Err(e) = self.log.flush() {
            self.log.discard_pending();
            return Err(e);
        }
        self.persisted.clear();
        self.ledger_persisted = None;
        // What was not saved before the clear is what the clear forgets.
        self.behind = None;
        Ok(())
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        self.log.path()
    }

    /// Whether the log is behind the conversation (the last write failed).
    pub fn behind(&self) -> Option<SessionBehind> {
        self.behind.clone()
    }

    /// Note a failed write at a commit point.
    fn fell_behind(&mut self, error: &SessionError) {
        let unsaved = self.behind.as_ref().map_or(0, |b| b.unsaved) + 1;
        self.behind = Some(SessionBehind {
            path: self.log.path().to_path_buf(),
            error: error.to_string(),
            unsaved,
        });
    }

    /// Write what changed since the last commit point, then `extra` records (a paused turn's),
    /// as one commit (nothing when nothing changed and `extra` is empty).
    ///
    /// # Errors
    /// [`SessionError`] when writing fails; nothing counts as persisted then, so the next call
    /// writes the whole difference again.
    pub fn persist_with(
        &mut self,
        conversation: &Conversation,
        archive: &Archive,
        ledger: &FileLedger,
        report: Option<&CompactionReport>,
        extra: Vec<SessionRecord>,
    ) -> Result<(), SessionError> {
        let now = conversation.messages();
        // Pointers first: a message persisted before is, unless rewritten, the same allocation.
        let extends = now.len() >= self.persisted.len()
            && now
                .iter()
                .zip(&self.persisted)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a == b);
        // The ledger, archive entries and report are queued typed: one that cannot be serialized
        // fails the flush below (SessionError::Serialize), never leaves a record out.
        let ledger_now = (!ledger.is_empty()).then(|| ledger.clone());
        let fresh: &[ArchiveEntry] = archive
            .entries()
            .get(self.archive_persisted..)
            .unwrap_or_default();
        // A request's rollback is written as what it is, not as a compaction.
        let rolled_back = extra.iter().any(|r| {
            matches!(
                r,
                SessionRecord::RequestClosed {
                    outcome: RequestOutcome::RolledBack
                }
            )
        });
        // New archive entries mean the history was rewritten, even if it still looks extended.
        if extends && fresh.is_empty() {
            for m in &now[self.persisted.len()..] {
                self.log
                    .append(SessionRecord::Message(StoredMessage::from(&**m)));
            }
        } else if rolled_back {
            self.log.append(SessionRecord::RolledBack {
                messages: now.iter().map(|m| StoredMessage::from(&**m)).collect(),
                archive_entries: fresh.to_vec(),
                report: report.cloned().map(Box::new),
            });
        } else {
            let summary = now
                .iter()
                .rev()
                .find(|m| m.kind == MessageKind::Summary)
                .map(|m| m.text());
            self.log
                .append(SessionRecord::Compaction(Box::new(CompactionRecord {
                    messages: now.iter().map(|m| StoredMessage::from(&**m)).collect(),
                    summary,
                    read_files: ledger.read_only_files().into_iter().collect(),
                    modified_files: ledger.modified_files().into_iter().collect(),
                    archived: fresh.iter().map(|e| e.original.id).collect(),
                    archive_entries: fresh.to_vec(),
                    ledger: ledger_now.clone(),
                    report: report.cloned(),
                })));
        }
        if ledger_now != self.ledger_persisted
            && let Some(l) = &ledger_now
        {
            self.log.append(SessionRecord::Ledger { ledger: l.clone() });
        }
        for record in extra {
            self.log.append(record);
        }
        if let Err(e) = self.log.flush() {
            self.log.discard_pending();
            self.fell_behind(&e);
            return Err(e);
        }
        self.persisted = now.to_vec();
        self.archive_persisted = archive.len();
        self.ledger_persisted = ledger_now;
        self.behind = None;
        self.next_id = self.next_id.max(conversation.next_id().0);
        Ok(())
    }

    /// The first message id the log has not used.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }
}
