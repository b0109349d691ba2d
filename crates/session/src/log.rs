//! [`SessionLog`]: an open, locked log that appends one commit per commit point.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use troupe_protocol::{ChatMessage, StoredMessage};

use super::error::SessionError;
use super::files::{open_regular, sync_parent_dir};
use super::lock::{Held, SessionLock};
use super::records::{SESSION_FORMAT_VERSION, Session, SessionRecord};
use super::scan::scan;

/// An open session log, appending at commit points.
#[derive(Debug)]
pub struct SessionLog {
    path: PathBuf,
    file: File,
    pending: Vec<SessionRecord>,
    /// The claim, when this log took its own ([`SessionLog::open`]).
    _claim: Option<SessionLock>,
    /// The `flock`, which keeps other processes out while this log is open.
    _held: Arc<Held>,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl SessionLog {
    /// Lock the log at `path`, open it for appending, creating it (with a header and its
    /// directories) if missing, and return the session it holds. The lock is released when the
    /// log is dropped.
    ///
    /// An existing log is loaded first; an unfinished tail (torn line, uncommitted records) is cut
    /// off the file so that new records follow the last complete turn — the returned session's
    /// `warnings` say what was cut.
    ///
    /// # Errors
    /// [`SessionError::InUse`] when another process (or another open log in this one) holds the
    /// session; otherwise as [`SessionLog::open_locked`].
    pub fn open(path: &Path) -> Result<(SessionLog, Session), SessionError> {
        Self::open_for(path, None)
    }

    /// [`SessionLog::open`], naming the agent in the header of a new log.
    ///
    /// # Errors
    /// As [`SessionLog::open`].
    pub fn open_for(
        path: &Path,
        agent: Option<&str>,
    ) -> Result<(SessionLog, Session), SessionError> {
        let claim = SessionLock::acquire(path)?;
        let (mut log, session) = Self::open_locked(&claim, agent)?;
        log._claim = Some(claim);
        Ok((log, session))
    }

    /// Open the log `lock` was acquired for, under that lock (which the caller keeps: e.g. an
    /// agent factory that rebuilds its agent, and reopens the log, after a failure), naming
    /// `agent` in the header of a new log.
    ///
    /// # Errors
    /// [`SessionError::NotRegularFile`] when the path is a FIFO, device, directory…;
    /// [`SessionError::Io`] when the file cannot be read or written; [`SessionError::Corrupt`]
    /// or [`SessionError::Invalid`] when it is damaged or holds agent state of another shape
    /// (then nothing is changed on disk).
    pub fn open_locked(
        lock: &SessionLock,
        agent: Option<&str>,
    ) -> Result<(SessionLog, Session), SessionError> {
        let path = lock.log_path();
        let io = |source| SessionError::Io {
            path: path.to_path_buf(),
            cause: source,
        };
        let existed = path.exists();
        let mut file = open_regular(
            path,
            OpenOptions::new().create(true).read(true).append(true),
        )?;
        if !lock.locks(&file) {
            return Err(io(std::io::Error::other(
                "the log was replaced by another file after it was locked; open the session again",
            )));
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let mut log = SessionLog {
            path: path.to_path_buf(),
            file,
            pending: Vec::new(),
            _claim: None,
            _held: lock.share(),
        };
        if !bytes.is_empty() {
            let scan = scan(path, &bytes)?;
            if scan.committed_len < bytes.len() as u64 {
                log.file.set_len(scan.committed_len).map_err(io)?;
                log.file.sync_data().map_err(io)?;
            } else if scan.missing_newline {
                // The next record must start a line of its own, not glue onto the commit.
                log.file.write_all(b"\n").map_err(io)?;
                log.file.sync_data().map_err(io)?;
            }
            return Ok((log, scan.session));
        }
        log.append(SessionRecord::Session {
            version: SESSION_FORMAT_VERSION,
            agent: agent.map(str::to_string),
            created_ms: now_ms(),
        });
        log.flush()?;
        if !existed {
            sync_parent_dir(path)?;
        }
        let session = Session {
            agent: agent.map(str::to_string),
            ..Session::default()
        };
        Ok((log, session))
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queue a record; nothing is written until [`SessionLog::flush`].
    pub fn append(&mut self, record: SessionRecord) {
        self.pending.push(record);
    }

    /// Queue a message record.
    pub fn append_message(&mut self, message: &ChatMessage) {
        self.append(SessionRecord::Message(StoredMessage::from(message)));
    }

    /// Drop the queued records (after a failed [`SessionLog::flush`], when the caller will queue
    /// the same changes again).
    pub fn discard_pending(&mut self) {
        self.pending.clear();
    }

    /// Records queued and not yet flushed.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Write the queued records and a commit line in one write, then fsync: the turn is durable.
    /// Does nothing when nothing is queued.
    ///
    /// # Errors
    /// [`SessionError`] when serializing or writing fails; the queue is kept so a later flush
    /// can retry.
    pub fn flush(&mut self) -> Result<(), SessionError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let text = commit_text(&self.pending, &self.path)?;
        let io = |source| SessionError::Io {
            path: self.path.clone(),
            cause: source,
        };
        let start = self.file.metadata().map_err(io)?.len();
        if let Err(e) = self
            .file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.sync_data())
        {
            // A partial write must not stay behind: later records and their commit would make
            // it part of a commit. Cut the file back to the last commit.
            let _ = self.file.set_len(start);
            return Err(io(e));
        }
        self.pending.clear();
        Ok(())
    }
}

/// `pending` and a commit line as the JSONL text of one commit (every backend stores these
/// bytes).
pub(crate) fn commit_text(pending: &[SessionRecord], path: &Path) -> Result<String, SessionError> {
    let mut text = String::new();
    for record in pending
        .iter()
        .chain(std::iter::once(&SessionRecord::Commit))
    {
        let line = serde_json::to_string(record).map_err(|e| SessionError::Serialize {
            path: path.to_path_buf(),
            reason: format!("a `{}` record: {e}", record.kind()),
        })?;
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}
