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
//!
//! The records are typed by [`AgentSession`]: a ledger, archive entry or report of the wrong shape
//! is refused at its line when the log is read, and one that cannot be serialized fails the write
//! with [`SessionError::Serialize`] (nothing is dropped).
//!
//! The log's lock ([`SessionLock`]) belongs to whoever owns the agent for its whole life: the
//! factory the supervisor rebuilds it with ([`SessionClaim`]), so a rebuilt agent reopens its log
//! under the same claim instead of finding it locked by its own failed predecessor.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use troupe_compaction::{Archive, ArchiveEntry, CompactionReport};
use troupe_runtime::TraceContext;
use troupe_runtime::session::{
    CompactionRecord, SessionError, SessionLock, SessionLog, SessionRecord, SessionSchema,
};
use troupe_runtime::{AskError, ChatMessage, Conversation, Job, MessageKind, StoredMessage, Team};
use troupe_tools::FileLedger;

/// The agent state an [`crate::LlmAgent`]'s session log records: its [`FileLedger`], the
/// [`ArchiveEntry`]s of its compactions and their [`CompactionReport`]s. Read a log with it:
/// `troupe_runtime::session::load_typed::<AgentSession>(path)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentSession;

impl SessionSchema for AgentSession {
    type Ledger = FileLedger;
    type ArchiveEntry = ArchiveEntry;
    type Report = CompactionReport;
}

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
            crate::agent_jobs::COMPACTION_TIMEOUT,
        )
        .await
}

/// A session log of an agent.
pub(crate) type Session = troupe_runtime::session::Session<AgentSession>;

/// What an agent resumes with.
pub(crate) struct Restored {
    pub(crate) conversation: Conversation,
    pub(crate) ledger: FileLedger,
    pub(crate) archive: Archive,
    pub(crate) last_compaction: Option<CompactionReport>,
}

/// The agent state a session describes.
pub(crate) fn restore(session: &Session) -> Restored {
    Restored {
        conversation: session.conversation.clone(),
        ledger: session.ledger.clone().unwrap_or_default(),
        archive: Archive::from(session.archive_entries.clone()),
        last_compaction: session.last_report.clone(),
    }
}

/// The claim on an agent's session log, shared by every build of that agent (an agent factory
/// holds one): taken at the first build, released when the last holder goes.
#[derive(Clone, Default)]
pub(crate) struct SessionClaim(Arc<Mutex<Option<SessionLock>>>);

impl SessionClaim {
    /// Open the log at `path` under this claim, taking it first if it is not yet held.
    fn open(
        &self,
        path: &Path,
        agent: &str,
    ) -> Result<(SessionLog<AgentSession>, Session), SessionError> {
        // A panic elsewhere while this was held leaves a valid `Option`: poison is moot.
        let mut slot = troupe_runtime::sync::lock(&self.0);
        let lock = match slot.take() {
            Some(lock) if lock.log_path() == path => lock,
            _ => SessionLock::acquire(path)?,
        };
        let opened = SessionLog::open_locked_typed(&lock, Some(agent));
        *slot = Some(lock);
        opened
    }

    /// The log this claim holds now: after a [`SessionSync::switch`], not the one the agent's
    /// spec names, so a rebuilt agent reopens the log it last kept.
    pub(crate) fn held_path(&self) -> Option<PathBuf> {
        troupe_runtime::sync::lock(&self.0)
            .as_ref()
            .map(|lock| lock.log_path().to_path_buf())
    }

    /// Open the log at `path` and, once `prepare` accepted it, hold its lock instead of the one
    /// held now. Any failure leaves the claim as it was.
    fn switch(
        &self,
        path: &Path,
        agent: &str,
        prepare: impl FnOnce(&mut SessionLog<AgentSession>, &Session) -> Result<(), SessionError>,
    ) -> Result<(SessionLog<AgentSession>, Session), SessionError> {
        let mut slot = troupe_runtime::sync::lock(&self.0);
        if let Some(held) = slot.as_ref().filter(|lock| lock.log_path() == path) {
            let (mut log, session) = SessionLog::open_locked_typed(held, Some(agent))?;
            prepare(&mut log, &session)?;
            return Ok((log, session));
        }
        let fresh = SessionLock::acquire(path)?;
        let (mut log, session) = SessionLog::open_locked_typed(&fresh, Some(agent))?;
        prepare(&mut log, &session)?;
        // The old lock goes only now: the agent is never left without a log.
        *slot = Some(fresh);
        Ok((log, session))
    }
}

/// Append and flush a `model_change` to `model` when the log last named another one (or none);
/// a failed write leaves nothing pending.
fn record_model(
    log: &mut SessionLog<AgentSession>,
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
pub(crate) struct SessionSync {
    log: SessionLog<AgentSession>,
    /// The claim on the log: the factory's (shared by every build of the agent) or, for an
    /// agent built without one, its own.
    claim: SessionClaim,
    persisted: Vec<Arc<ChatMessage>>,
    archive_persisted: usize,
    ledger_persisted: Option<FileLedger>,
    /// Set while the log is behind: the last write failed.
    behind: Option<SessionBehind>,
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
    /// As [`SessionLog::open_for`]; [`SessionError::InUse`] when another owner holds the log.
    pub(crate) fn open(
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
        record_model(&mut self.log, logged, model)
    }

    /// Continue from the log at `path` (see [`crate::SwitchSession`]): open it under this
    /// sync's claim, record `model` in it, and return the sync that keeps it with the session it
    /// holds. On an error this sync, its log and its claim are unchanged.
    ///
    /// # Errors
    /// As [`SessionSync::open`], and [`SessionError`] when the model change cannot be written.
    pub(crate) fn switch(
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
        };
        Ok((sync, session))
    }

    /// Record a fresh start (`/clear`) as one committed turn: loading forgets everything before
    /// it but the archive.
    ///
    /// # Errors
    /// [`SessionError`] when writing fails; nothing is written then.
    pub(crate) fn clear(&mut self) -> Result<(), SessionError> {
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
    pub(crate) fn path(&self) -> &Path {
        self.log.path()
    }

    /// Whether the log is behind the conversation (the last write failed).
    pub(crate) fn behind(&self) -> Option<SessionBehind> {
        self.behind.clone()
    }

    /// Note a failed write at a turn boundary.
    fn fell_behind(&mut self, error: &SessionError) {
        let unsaved = self.behind.as_ref().map_or(0, |b| b.unsaved) + 1;
        self.behind = Some(SessionBehind {
            path: self.log.path().to_path_buf(),
            error: error.to_string(),
            unsaved,
        });
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
                .map(|m| m.text());
            self.log.append(SessionRecord::Compaction(CompactionRecord {
                messages: now.iter().map(|m| StoredMessage::from(&**m)).collect(),
                summary,
                read_files: ledger.read_only_files().into_iter().collect(),
                modified_files: ledger.modified_files().into_iter().collect(),
                archived: fresh.iter().map(|e| e.original.id).collect(),
                archive_entries: fresh.to_vec(),
                ledger: ledger_now.clone(),
                report: report.cloned(),
            }));
        }
        if ledger_now != self.ledger_persisted
            && let Some(l) = &ledger_now
        {
            self.log.append(SessionRecord::Ledger { ledger: l.clone() });
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
        Ok(())
    }
}
