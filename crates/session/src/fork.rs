//! Time travel: a new log that ends at a step of another ([`Session::fork`]).
//!
//! A log is append-only and replays commit by commit, so the log as it stood at step N is its
//! bytes up to the end of commit N: the fork copies those, and loading it restores the
//! conversation, archive, ledger and summary state as they were then — before a compaction
//! that came later, the messages it replaced are still messages. A fork that ends in the middle
//! of a request (durable steps) is a request in flight: the agent that opens it resumes the
//! request from that step, making the model calls after it anew.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::Path;

use super::error::SessionError;
use super::files::{open_regular, sync_parent_dir};
use super::lock::SessionLock;
use super::records::Session;
use super::scan::scan;
use super::steps::steps_of;

impl Session {
    /// Write a new log at `out` holding the log at `log` up to and including step `at` (an id
    /// [`super::steps`] lists), and return the session it restores. The original is read under
    /// its lock (a log another owner has open is refused, not read mid-commit) and left
    /// untouched; `out` must not exist or be an empty file (not a symbolic link), and is written
    /// under its own lock, fsynced.
    ///
    /// # Errors
    /// [`SessionError::UnknownStep`] when the log has no step `at`; [`SessionError::Exists`]
    /// when `out` holds a log already (the original itself, by any name, included) or is a
    /// symbolic link;
    /// [`SessionError::Io`] when `log` does not exist or `out`'s directory does not (neither is
    /// created); [`SessionError::InUse`] when either log is held by
    /// another owner; otherwise as [`super::load`].
    pub fn fork(log: &Path, at: usize, out: &Path) -> Result<Session, SessionError> {
        // Locking creates a missing log and the directories of a missing new one: a fork
        // makes neither (a mistyped path is an error, not a new empty session or a new tree).
        std::fs::metadata(log).map_err(|cause| SessionError::Io {
            path: log.to_path_buf(),
            cause,
        })?;
        let out_dir = out
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !out_dir.is_dir() {
            return Err(SessionError::Io {
                path: out.to_path_buf(),
                cause: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "its directory {} does not exist; a fork creates no directories",
                        out_dir.display()
                    ),
                ),
            });
        }
        let _source = SessionLock::acquire(log)?;
        let mut bytes = Vec::new();
        open_regular(log, OpenOptions::new().read(true))?
            .read_to_end(&mut bytes)
            .map_err(|cause| SessionError::Io {
                path: log.to_path_buf(),
                cause,
            })?;
        let (steps, _) = steps_of(log, &bytes)?;
        let Some(step) = steps.get(at) else {
            return Err(SessionError::UnknownStep {
                path: log.to_path_buf(),
                step: at.to_string(),
                steps: steps.len(),
            });
        };
        let kept = bytes.get(..step.end as usize).unwrap_or(&bytes);
        // A symbolic link at `out`, even a dangling one, is an entry there already: writing
        // the new log through it would create or fill a file the link names, not `out`.
        let exists = |path: &Path| {
            std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink() || m.len() > 0)
        };
        if exists(out) {
            return Err(SessionError::Exists {
                path: out.to_path_buf(),
            });
        }
        let _target = SessionLock::acquire(out)?;
        let io = |cause| SessionError::Io {
            path: out.to_path_buf(),
            cause,
        };
        let mut file = open_regular(out, OpenOptions::new().read(true).append(true))?;
        // Checked again under the lock: another fork may have written it in between.
        if file.metadata().map_err(io)?.len() > 0 {
            return Err(SessionError::Exists {
                path: out.to_path_buf(),
            });
        }
        file.write_all(kept)
            .and_then(|()| file.sync_data())
            .map_err(io)?;
        sync_parent_dir(out)?;
        Ok(scan(out, kept)?.session)
    }
}
