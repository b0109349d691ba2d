//! [`SessionStore`]: where session logs live, behind one interface. The JSONL files beside the
//! program (a lock per log, `lock.rs`; a commit per flush, `log.rs`) are the embedded default;
//! every road that reads or writes a log — an agent's [`SessionSync`](crate::SessionSync) under
//! its [`SessionClaim`](crate::SessionClaim), [`SessionStore::load`], [`SessionStore::steps`],
//! [`SessionStore::fork`] — goes through a store, so a shared backend serves them all alike:
//! Postgres (`postgres/`), where a claim is a lease and every commit checks it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::error::SessionError;
use crate::lock::SessionLock;
use crate::log::SessionLog;
use crate::postgres::{Postgres, PostgresOptions};
use crate::records::{Session, SessionRecord};
use crate::steps::Step;

/// A log open for writing: records queued, written as one commit by each flush.
pub(crate) trait CommitLog: Send + Sync + fmt::Debug {
    /// Queue a record; nothing is written until [`CommitLog::flush`].
    fn append(&mut self, record: SessionRecord);
    /// Write the queued records as one commit, durably; nothing when none is queued.
    fn flush(&mut self) -> Result<(), SessionError>;
    /// Drop the queued records (after a failed flush).
    fn discard_pending(&mut self);
    /// The log's name (a file's path).
    fn path(&self) -> &Path;
}

/// The exclusive right to write one log, held until dropped.
pub(crate) trait Claimed: Send + fmt::Debug {
    /// The log it is for.
    fn log_path(&self) -> &Path;
    /// Open the log under this claim, naming `agent` in a new log's header.
    fn open(&self, agent: Option<&str>) -> Result<(Box<dyn CommitLog>, Session), SessionError>;
}

/// What a store does: claim a log for writing, and read, list and fork logs.
pub(crate) trait Backend: Send + Sync + fmt::Debug {
    fn claim(&self, log: &Path) -> Result<Box<dyn Claimed>, SessionError>;
    fn load(&self, log: &Path) -> Result<Session, SessionError>;
    fn steps(&self, log: &Path) -> Result<Vec<Step>, SessionError>;
    fn fork(&self, log: &Path, at: usize, out: &Path) -> Result<Session, SessionError>;
    /// The store in words (`files`, a URL without its password).
    fn describe(&self) -> String;
}

/// Where session logs live. [`SessionStore::files`] (the default): one JSONL file per log;
/// [`SessionStore::postgres`]: logs in a database that every node of a cluster reaches.
#[derive(Clone, Debug)]
pub struct SessionStore(Arc<dyn Backend>);

impl Default for SessionStore {
    fn default() -> Self {
        SessionStore::files()
    }
}

impl SessionStore {
    /// Logs as JSONL files, each path its own log (the embedded default).
    pub fn files() -> Self {
        SessionStore(Arc::new(Files))
    }

    /// Logs in the Postgres database at `url` (`postgres://user:password@host:port/db`), each
    /// path's text naming its log: connects, brings the schema up to date (versioned
    /// migrations) and starts renewing this store's leases. A claim of a log is a lease of
    /// `options.lease`, and every commit checks it (see the `postgres` module's docs).
    ///
    /// # Errors
    /// [`SessionError::Connect`] when the URL is not one, the database cannot be reached or its
    /// schema was written by a newer troupe.
    pub fn postgres(url: &str, options: PostgresOptions) -> Result<Self, SessionError> {
        Ok(SessionStore(Arc::new(Postgres::connect(url, options)?)))
    }

    /// The store in words: `files`, or the database's URL without its password.
    pub fn describe(&self) -> String {
        self.0.describe()
    }

    /// Claim the log `log` for writing (refused while another owner holds it).
    pub(crate) fn claim(&self, log: &Path) -> Result<Box<dyn Claimed>, SessionError> {
        self.0.claim(log)
    }

    /// The session the log `log` holds, as of its last commit (read-only; takes no lock).
    ///
    /// # Errors
    /// As [`crate::load`].
    pub fn load(&self, log: &Path) -> Result<Session, SessionError> {
        self.0.load(log)
    }

    /// The committed steps of the log `log`, oldest first.
    ///
    /// # Errors
    /// As [`crate::steps`].
    pub fn steps(&self, log: &Path) -> Result<Vec<Step>, SessionError> {
        self.0.steps(log)
    }

    /// A new log `out` holding `log` up to and including step `at`.
    ///
    /// # Errors
    /// As [`Session::fork`].
    pub fn fork(&self, log: &Path, at: usize, out: &Path) -> Result<Session, SessionError> {
        self.0.fork(log, at, out)
    }
}

/// The file backend: a log is a JSONL file, claimed with an `flock` ([`SessionLock`]).
#[derive(Debug)]
struct Files;

impl Backend for Files {
    fn claim(&self, log: &Path) -> Result<Box<dyn Claimed>, SessionError> {
        Ok(Box::new(SessionLock::acquire(log)?))
    }

    fn load(&self, log: &Path) -> Result<Session, SessionError> {
        crate::scan::load(log)
    }

    fn steps(&self, log: &Path) -> Result<Vec<Step>, SessionError> {
        crate::steps::steps(log)
    }

    fn fork(&self, log: &Path, at: usize, out: &Path) -> Result<Session, SessionError> {
        Session::fork(log, at, out)
    }

    fn describe(&self) -> String {
        "files".to_string()
    }
}

impl Claimed for SessionLock {
    fn log_path(&self) -> &Path {
        SessionLock::log_path(self)
    }

    fn open(&self, agent: Option<&str>) -> Result<(Box<dyn CommitLog>, Session), SessionError> {
        let (log, session) = SessionLog::open_locked(self, agent)?;
        Ok((Box::new(log), session))
    }
}

impl CommitLog for SessionLog {
    fn append(&mut self, record: SessionRecord) {
        SessionLog::append(self, record);
    }

    fn flush(&mut self) -> Result<(), SessionError> {
        SessionLog::flush(self)
    }

    fn discard_pending(&mut self) {
        SessionLog::discard_pending(self);
    }

    fn path(&self) -> &Path {
        SessionLog::path(self)
    }
}
