//! [`SessionLock`]: one writer per session log, across processes and within one.
//!
//! The lock belongs to the log *file*, not to the name it was reached by: a symbolic link, a
//! hard link or another spelling of an open log's path is the same session and is refused the
//! same way. On Unix it is an `flock` on the log itself (which [`SessionLock::acquire`] creates,
//! empty, when missing — an empty log is a valid empty session), and within one process claims
//! are keyed by the file's (device, inode). The kernel drops an `flock` when its holder dies, so
//! a killed process leaves nothing "in use" behind.
//!
//! The holder's pid goes into a sidecar note, `<log>.lock` next to the log's canonical path
//! (symbolic links resolved), so that a refused opener can say who holds the session; it is
//! cleared when the lock is released. The note is troupe's own file and is opened following no
//! symbolic link: one planted in its place (or a hard link of another file) is refused, never
//! written through ([`SessionError::UnsafeLockNote`]). A log reached through a hard link of another name has
//! another note: the refusal then says "another process". Elsewhere than on Unix the sidecar is
//! also the locked file (a lock on the log itself would be mandatory there and block the log's
//! own writes), so there only spellings and symbolic links of one path are recognised.
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
use super::files::{
    create_dirs_durably, open_own_note, open_regular, refuse_irregular, sync_parent_dir,
};

/// The sidecar pid note of the log at `log`: the log's file name with `.lock` appended.
pub fn lock_path(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    log.with_file_name(name)
}

/// Which file a lock is for, whatever name it was reached by: its (device, inode) on Unix, its
/// canonical path elsewhere (no inodes in portable `std`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileKey(#[cfg(unix)] (u64, u64), #[cfg(not(unix))] PathBuf);

#[cfg(unix)]
fn file_key(_log: &Path, file: &File) -> std::io::Result<FileKey> {
    use std::os::unix::fs::MetadataExt as _;
    let metadata = file.metadata()?;
    Ok(FileKey((metadata.dev(), metadata.ino())))
}

#[cfg(not(unix))]
fn file_key(log: &Path, _file: &File) -> std::io::Result<FileKey> {
    std::fs::canonicalize(log).map(FileKey)
}

/// The process's `flock`s, by the identity of their log file.
static HELD: Mutex<Option<HashMap<FileKey, Weak<Held>>>> = Mutex::new(None);

fn held_locks() -> MutexGuard<'static, Option<HashMap<FileKey, Weak<Held>>>> {
    // The map stays consistent under a panic (single inserts and removes), so poison is moot.
    troupe_protocol::sync::lock(&HELD)
}

/// An `flock` this process holds on one log.
#[derive(Debug)]
pub(super) struct Held {
    /// The locked file (Unix: the log; elsewhere: the sidecar); `None` only while being dropped.
    locked: Option<File>,
    /// The sidecar note naming this process (Unix; elsewhere the note is `locked` itself).
    note: Option<File>,
    /// The registry key.
    key: FileKey,
    /// Whether a [`SessionLock`] currently claims the log.
    claimed: AtomicBool,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Unlock and unregister under the registry's mutex: an opener in this process then sees
        // either this lock (and waits for it to go) or none (and the file is already unlocked).
        let mut registry = held_locks();
        // No longer the holder: a stale pid would name a process that may be something else now.
        if let Some(note) = self.note.as_ref().or(self.locked.as_ref()) {
            let _ = note.set_len(0);
        }
        drop(self.note.take());
        drop(self.locked.take());
        if let Some(map) = registry.as_mut()
            && map.get(&self.key).is_some_and(|w| w.strong_count() == 0)
        {
            map.remove(&self.key);
        }
    }
}

/// The exclusive right to write one session log, held until dropped.
///
/// [`super::SessionLog::open`] takes one for itself; an owner that outlives its logs — an agent's
/// factory, whose agent the supervisor may rebuild — takes one with [`SessionLock::acquire`] and
/// opens each log under it with [`super::SessionLog::open_locked`].
#[derive(Debug)]
pub struct SessionLock {
    log: PathBuf,
    held: Arc<Held>,
}

impl SessionLock {
    /// Claim the log at `log` (created empty, with its directories, when missing), writing this
    /// process's pid into its sidecar note.
    ///
    /// # Errors
    /// [`SessionError::InUse`] when another process holds the log's lock, or another claim in
    /// this one — under any name of the file: symbolic links, hard links (Unix) and other
    /// spellings of the path are one session; [`SessionError::NotRegularFile`] when the log
    /// exists and is not a regular file; [`SessionError::UnsafeLockNote`] when its sidecar note
    /// is a symbolic link, a hard link or not a regular file; [`SessionError::Io`] when it
    /// cannot be created or locked.
    pub fn acquire(log: &Path) -> Result<SessionLock, SessionError> {
        refuse_irregular(log)?;
        if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_dirs_durably(dir)?;
        }
        let io = |source| SessionError::Io {
            path: log.to_path_buf(),
            cause: source,
        };
        let in_use = |pid| SessionError::InUse {
            path: log.to_path_buf(),
            pid,
        };
        loop {
            let existed = log.exists();
            let file = open_regular(log, OpenOptions::new().append(true).create(true))?;
            if !existed {
                sync_parent_dir(log)?;
            }
            let key = file_key(log, &file).map_err(io)?;
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
            let note_path = lock_path(&std::fs::canonicalize(log).map_err(io)?);
            let (locked, note) = lock_files(file, &note_path)?;
            if !try_lock(&locked).map_err(io)? {
                return Err(in_use(read_pid(note.as_ref().unwrap_or(&locked))));
            }
            write_pid(note.as_ref().unwrap_or(&locked)).map_err(|source| SessionError::Io {
                path: note_path.clone(),
                cause: source,
            })?;
            let held = Arc::new(Held {
                locked: Some(locked),
                note,
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

    /// Whether `file`, opened at [`SessionLock::log_path`], is the file this lock is for (the
    /// path may have been replaced by another file since).
    pub(super) fn locks(&self, file: &File) -> bool {
        file_key(&self.log, file).is_ok_and(|key| key == self.held.key)
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

/// The file to lock and the pid note: the log itself and its sidecar.
#[cfg(unix)]
fn lock_files(log: File, note_path: &Path) -> Result<(File, Option<File>), SessionError> {
    Ok((log, Some(open_own_note(note_path)?)))
}

/// The file to lock and the pid note: the sidecar is both.
#[cfg(not(unix))]
fn lock_files(_log: File, note_path: &Path) -> Result<(File, Option<File>), SessionError> {
    Ok((open_own_note(note_path)?, None))
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

/// The pid a holder recorded in its note, read through the note opened here (never the path
/// again: it may have been swapped since); `None` when there is none, e.g. the holder came
/// through a hard link of another name, or is mid-write.
fn read_pid(mut note: &File) -> Option<u32> {
    let mut text = String::new();
    note.seek(SeekFrom::Start(0)).ok()?;
    note.take(64).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

fn write_pid(mut file: &File) -> std::io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    writeln!(file, "{}", std::process::id())
}
