//! [`SessionLock`]: one writer per session log, across processes and within one.
//!
//! The lock is an `flock` on a sidecar file, `<log>.lock`, which also holds the holder's pid so
//! that a refused opener can say who holds it. The kernel drops an `flock` when its holder dies,
//! so a pid left behind by a killed process is not "in use": the next opener takes the lock and
//! overwrites the pid. The sidecar is never deleted (deleting it would let a second opener lock a
//! fresh inode while the first still holds the old one).
//!
//! Within one process the `flock` is taken once per log and shared: an agent rebuilt by its
//! supervisor must not lock itself out while its failed predecessor is still being dropped. Who
//! may write is decided by the *claim* ([`SessionLock`]): one at a time per log, released when
//! the claim is dropped; the `flock` is released when the claim and every log opened under it
//! are gone.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::error::SessionError;
use super::files::{create_dirs_durably, open_regular, refuse_irregular};

/// The sidecar lock file of the log at `log`: the log's file name with `.lock` appended.
pub fn lock_path(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    log.with_file_name(name)
}

/// The process's `flock`s, by the canonical path of their lock file.
static HELD: Mutex<Option<HashMap<PathBuf, Weak<Held>>>> = Mutex::new(None);

fn held_locks() -> MutexGuard<'static, Option<HashMap<PathBuf, Weak<Held>>>> {
    // The map stays consistent under a panic (single inserts and removes), so poison is moot.
    crate::sync::lock(&HELD)
}

/// An `flock` this process holds on one log's lock file.
#[derive(Debug)]
pub(super) struct Held {
    /// The locked file; `None` only while being dropped.
    file: Option<File>,
    /// The registry key.
    key: PathBuf,
    /// Whether a [`SessionLock`] currently claims the log.
    claimed: AtomicBool,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Unlock and unregister under the registry's mutex: an opener in this process then sees
        // either this lock (and waits for it to go) or none (and the file is already unlocked).
        let mut registry = held_locks();
        drop(self.file.take());
        if let Some(map) = registry.as_mut()
            && map.get(&self.key).is_some_and(|w| w.strong_count() == 0)
        {
            map.remove(&self.key);
        }
    }
}

/// The exclusive right to write one session log, held until dropped.
///
/// [`crate::session::SessionLog::open`] takes one for itself; an owner that outlives its logs —
/// an agent's factory, whose agent the supervisor may rebuild — takes one with
/// [`SessionLock::acquire`] and opens each log under it with
/// [`crate::session::SessionLog::open_locked`].
#[derive(Debug)]
pub struct SessionLock {
    log: PathBuf,
    held: Arc<Held>,
}

impl SessionLock {
    /// Claim the log at `log` (which need not exist yet; its directory is created), writing this
    /// process's pid into its lock file.
    ///
    /// # Errors
    /// [`SessionError::InUse`] when another process holds the lock, or another claim in this
    /// one; [`SessionError::NotRegularFile`] when the log or its lock file exists and is not a
    /// regular file;
    /// [`SessionError::Io`] when it cannot be created or locked.
    pub fn acquire(log: &Path) -> Result<SessionLock, SessionError> {
        refuse_irregular(log)?;
        if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_dirs_durably(dir)?;
        }
        let path = lock_path(log);
        let io = |source| SessionError::Io {
            path: path.clone(),
            cause: source,
        };
        let in_use = |pid| SessionError::InUse {
            path: log.to_path_buf(),
            pid,
        };
        loop {
            let mut file = open_regular(
                &path,
                OpenOptions::new().read(true).write(true).create(true),
            )?;
            let key = std::fs::canonicalize(&path).map_err(io)?;
            let mut registry = held_locks();
            let map = registry.get_or_insert_with(HashMap::new);
            if let Some(weak) = map.get(&key) {
                let held = weak.upgrade();
                // Unlocked before `held` can be dropped: dropping the last share takes the lock.
                drop(registry);
                let Some(held) = held else {
                    // Its last owner is dropping it right now; it unregisters once unlocked.
                    std::thread::yield_now();
                    continue;
                };
                if held.claimed.swap(true, Ordering::AcqRel) {
                    return Err(in_use(Some(std::process::id())));
                }
                return Ok(SessionLock {
                    log: log.to_path_buf(),
                    held,
                });
            }
            if !try_lock(&file).map_err(io)? {
                return Err(in_use(read_pid(&mut file)));
            }
            write_pid(&mut file).map_err(io)?;
            let held = Arc::new(Held {
                file: Some(file),
                key: key.clone(),
                claimed: AtomicBool::new(true),
            });
            map.insert(key, Arc::downgrade(&held));
            return Ok(SessionLock {
                log: log.to_path_buf(),
                held,
            });
        }
    }

    /// The log this lock is for.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// A share of the `flock` for a log opened under this claim: it keeps other processes out
    /// for as long as the log lives, even if the claim goes first.
    pub(super) fn share(&self) -> Arc<Held> {
        self.held.clone()
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        self.held.claimed.store(false, Ordering::Release);
    }
}

/// Take an exclusive `flock` on `file` without waiting: `false` when someone else holds it.
#[cfg(unix)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Take an exclusive lock on `file` without waiting: `false` when someone else holds it.
#[cfg(not(unix))]
#[allow(clippy::incompatible_msrv)] // File::try_lock is std's portable lock (Rust 1.89).
fn try_lock(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// The pid a holder recorded (`None` when the file holds none, e.g. mid-write).
fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

fn write_pid(file: &mut File) -> std::io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    writeln!(file, "{}", std::process::id())
}
