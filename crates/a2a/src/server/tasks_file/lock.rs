//! One writer per tasks file: an exclusive `flock` on a sidecar, `<file>.lock` (the tasks file
//! itself is replaced by each rewrite, and a lock on a replaced file guards nothing), holding
//! the holder's pid so a refused server can say who has the file. The kernel drops the lock
//! when its holder dies, so a killed server leaves nothing "in use" behind.
//!
//! The sidecar is opened as the tasks file is (`open_regular`): never through a symbolic link, so
//! a link planted there cannot make the pid note overwrite another file.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use super::open_regular;
use crate::error::ServeError;

/// The tasks file's lock, held until dropped.
pub(crate) struct TasksFileLock {
    file: File,
}

/// The sidecar of the tasks file at `tasks_file`: its file name with `.lock` appended.
fn lock_path(tasks_file: &Path) -> PathBuf {
    let mut name = tasks_file.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    tasks_file.with_file_name(name)
}

impl TasksFileLock {
    /// Take the lock of the tasks file at `tasks_file`, or say who holds it.
    pub(crate) fn acquire(tasks_file: &Path) -> Result<TasksFileLock, ServeError> {
        let path = lock_path(tasks_file);
        let error = |source| ServeError::TasksFile {
            path: path.clone(),
            source,
        };
        let mut file = open_regular(
            &path,
            OpenOptions::new().read(true).write(true).create(true),
        )
        .map_err(&error)?;
        if !try_lock(&file).map_err(&error)? {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(ServeError::TasksFileInUse {
                path: tasks_file.to_path_buf(),
                pid: text.trim().parse().ok(),
            });
        }
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| writeln!(file, "{}", std::process::id()))
            .map_err(&error)?;
        Ok(TasksFileLock { file })
    }
}

impl Drop for TasksFileLock {
    fn drop(&mut self) {
        // No longer the holder: a stale pid would name a process that may be something else.
        let _ = self.file.set_len(0);
    }
}

/// An exclusive `flock` on `file` without waiting: `false` when someone else holds it.
#[cfg(unix)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// An exclusive lock on `file` without waiting: `false` when someone else holds it.
#[cfg(not(unix))]
#[allow(clippy::incompatible_msrv)] // File::try_lock is std's portable lock (Rust 1.89).
fn try_lock(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}
