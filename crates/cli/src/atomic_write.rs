//! Writing an output file so that a crash, a full disk or a failed write leaves either the old
//! file or the new one at its path, never a truncated mix — and never replaces what is not a
//! regular file.
//!
//! A regular file (or a path that does not exist yet) is replaced atomically: the bytes go to a
//! new file in the same directory (a rename is only atomic within one file system), which is
//! flushed to disk and then renamed over the target; the directory is flushed last so the rename
//! itself survives a crash. A new file is created `0o600` (transcripts, archives and their
//! temporary files are private: they hold whole conversations); a replaced one keeps its mode.
//!
//! An existing target that is not a regular file — directly or through a symbolic link — is
//! never replaced (as root, `--out /dev/null` would otherwise replace `/dev/null` for the whole
//! system). By kind:
//!
//! - a **character device** (`/dev/null`, a terminal) is written to as it is, in place;
//! - a **FIFO** (a named pipe, or `/dev/stdout` when stdout is a pipe) is written to as it is
//!   when it has a reader; without one it is refused at once with an error saying so (the open
//!   is non-blocking, so troupe never waits for a reader that may never come);
//! - a **directory**, **socket** or **block device** is refused with an error naming the kind.
//!
//! Writing in place is not atomic (a device or pipe has no "old content" to keep) and is not
//! fsynced (devices such as `/dev/null` refuse it).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Write `bytes` to `path`: atomically when it is a regular file or does not exist (afterwards
/// `path` holds exactly `bytes`, and if this fails `path` still holds what it held before, with
/// no temporary file left behind); in place when it is a character device or a FIFO with a
/// reader; refused otherwise (see the module documentation).
///
/// A `path` that is a symbolic link is resolved first, so the link stays and its target is
/// written (as a plain write would do). A replaced file keeps its permissions; a new one is
/// created `0o600`.
///
/// # Errors
/// Any I/O error of creating, writing, flushing or renaming (`path`'s directory must exist);
/// an error naming the kind for a directory, socket or block device, or for a FIFO without a
/// reader — each left as it was.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(kind) = special_target(path)? {
        return write_in_place(path, kind, bytes);
    }
    let target = resolve_link(path);
    let name = target.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        )
    })?;
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (temp_path, file) = create_temp_file(&dir, &name.to_string_lossy())?;
    let result = fill_and_rename(file, &temp_path, &target, bytes).and_then(|()| sync_dir(&dir));
    if result.is_err() {
        // Gone already when the rename succeeded and only the directory flush failed.
        let _ = fs::remove_file(&temp_path);
    }
    result
}

/// An existing target that is written to in place rather than replaced.
#[cfg_attr(not(unix), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    CharDevice,
    Fifo,
}

/// A refusal: `path` exists as something troupe neither writes to nor replaces.
fn refuse(kind: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "it is {kind}, which troupe neither writes to nor replaces; name a regular file, a \
             character device such as /dev/null, or a FIFO with a reader"
        ),
    )
}

/// What exists at `path` (symbolic links followed): `None` for a regular file or nothing (the
/// atomic replacement), the kind to write in place, or a refusal.
fn special_target(path: &Path) -> io::Result<Option<Special>> {
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let file_type = metadata.file_type();
    if file_type.is_file() {
        return Ok(None);
    }
    if file_type.is_dir() {
        return Err(refuse("a directory"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_char_device() {
            return Ok(Some(Special::CharDevice));
        }
        if file_type.is_fifo() {
            return Ok(Some(Special::Fifo));
        }
        if file_type.is_block_device() {
            return Err(refuse("a block device"));
        }
        if file_type.is_socket() {
            return Err(refuse("a socket"));
        }
    }
    Err(refuse("not a regular file"))
}

/// Write `bytes` into the device or FIFO at `path` as it is (no truncation, no rename).
///
/// The open is non-blocking: a FIFO without a reader fails at once (`ENXIO`) instead of waiting
/// for one, and a device that would wait (a modem line) does not hang either. The writes
/// themselves block as usual, so a slow reader gets every byte.
#[cfg(unix)]
fn write_in_place(path: &Path, kind: Special, bytes: &[u8]) -> io::Result<()> {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    use std::os::unix::fs::OpenOptionsExt as _;
    let opened = OpenOptions::new()
        .write(true)
        // The flag's bits fit an `i32` (`O_NONBLOCK` is a small positive constant).
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path);
    let no_reader = Some(rustix::io::Errno::NXIO.raw_os_error());
    let mut file = match opened {
        Err(e) if kind == Special::Fifo && e.raw_os_error() == no_reader => {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "it is a FIFO with no reader, and troupe does not wait for one: start the \
                 reader first",
            ));
        }
        other => other?,
    };
    // The path may have been swapped for a regular file since it was looked at: nothing is
    // written yet, and writing it in place would not be atomic.
    if file.metadata()?.is_file() {
        return Err(io::Error::other(
            "it was replaced by a regular file while troupe was writing it; nothing was written",
        ));
    }
    let flags = fcntl_getfl(&file)?;
    fcntl_setfl(&file, flags.difference(OFlags::NONBLOCK))?;
    file.write_all(bytes)?;
    file.flush()
}

/// Only Unix has character devices and FIFOs that [`special_target`] lets through.
#[cfg(not(unix))]
fn write_in_place(_path: &Path, _kind: Special, _bytes: &[u8]) -> io::Result<()> {
    Err(refuse("not a regular file"))
}

/// `path`, or the file a symbolic link at `path` points to when that exists.
fn resolve_link(path: &Path) -> PathBuf {
    let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link && let Ok(target) = fs::canonicalize(path) {
        return target;
    }
    path.to_path_buf()
}

/// A new, empty file next to the target, named so that it is clearly temporary and unique to this
/// process and call.
fn create_temp_file(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    let mut last_error = None;
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp_path = dir.join(format!(".{name}.{pid}.{n}.tmp"));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            // Private from the start: a replaced file gets its own mode back before the rename.
            options.mode(0o600);
        }
        match options.open(&temp_path) {
            Ok(file) => return Ok((temp_path, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        io::Error::other("could not create a temporary file next to the target")
    }))
}

fn fill_and_rename(mut file: File, temp: &Path, target: &Path, bytes: &[u8]) -> io::Result<()> {
    file.write_all(bytes)?;
    if let Ok(existing) = fs::metadata(target) {
        file.set_permissions(existing.permissions())?;
    }
    file.sync_all()?;
    drop(file);
    fs::rename(temp, target)
}

/// Flush a directory's entries (the rename) to disk. Only Unix can open a directory for this.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn creates_and_replaces_a_file_leaving_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        write_atomically(&path, b"first").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first");
        write_atomically(&path, b"second, longer").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second, longer");
        assert_eq!(names(dir.path()), ["out.json"]);
    }

    #[test]
    fn a_missing_directory_is_an_error_that_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_atomically(&dir.path().join("missing/out.json"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn a_directory_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inside"), b"kept").unwrap();
        let err = write_atomically(&target, b"x").unwrap_err();
        assert!(err.to_string().contains("it is a directory"), "{err}");
        assert_eq!(fs::read(target.join("inside")).unwrap(), b"kept");
        assert_eq!(names(dir.path()), ["taken"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_new_file_is_private_and_a_replaced_one_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.json");
        write_atomically(&path, b"x").unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        write_atomically(&path, b"y").unwrap();
        assert_eq!(mode(&path), 0o644);
    }

    #[cfg(unix)]
    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[cfg(unix)]
    fn is_fifo(path: &Path) -> bool {
        use std::os::unix::fs::FileTypeExt as _;
        fs::symlink_metadata(path).unwrap().file_type().is_fifo()
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_without_a_reader_is_refused_at_once_and_stays_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        for target in [&fifo, &link] {
            let err = write_atomically(target, b"x").unwrap_err();
            assert!(err.to_string().contains("FIFO with no reader"), "{err}");
        }
        assert!(is_fifo(&fifo));
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(names(dir.path()), ["link", "pipe"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_with_a_reader_gets_the_bytes_in_place() {
        use std::io::Read as _;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            // Blocks until the writer opens the FIFO, then reads to its end.
            std::thread::spawn(move || {
                let mut text = Vec::new();
                File::open(&fifo).unwrap().read_to_end(&mut text).unwrap();
                text
            })
        };
        // The reader's open is not observable: retry until it is waiting (a bounded wait).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match write_atomically(&fifo, b"through the pipe") {
                Ok(()) => break,
                Err(e) if std::time::Instant::now() < deadline => {
                    assert!(e.to_string().contains("no reader"), "{e}");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => panic!("the reader never came: {e}"),
            }
        }
        // Checked first: a replaced FIFO never gets its writer, and the reader would wait on.
        assert!(is_fifo(&fifo));
        assert_eq!(names(dir.path()), ["pipe"]);
        assert_eq!(reader.join().unwrap(), b"through the pipe");
    }

    /// A character device that is safe to name as a target: a private `/dev/null` made with
    /// `mknod` where possible, else `/dev/null` itself only when this process could not replace
    /// it anyway (not root) — a regression must not replace the system's `/dev/null`.
    #[cfg(unix)]
    fn char_device(dir: &Path) -> Option<PathBuf> {
        use std::os::unix::fs::MetadataExt as _;
        let node = dir.join("null");
        let made = std::process::Command::new("mknod")
            .arg(&node)
            .args(["c", "1", "3"])
            .status()
            .is_ok_and(|s| s.success());
        // A file system mounted `nodev` has the node but refuses to open it.
        if made && OpenOptions::new().write(true).open(&node).is_ok() {
            return Some(node);
        }
        let _ = fs::remove_file(&node);
        let probe = dir.join("probe");
        fs::write(&probe, b"").unwrap();
        let uid = fs::metadata(&probe).unwrap().uid();
        fs::remove_file(&probe).unwrap();
        (uid != 0).then(|| PathBuf::from("/dev/null"))
    }

    #[cfg(unix)]
    #[test]
    fn a_character_device_is_written_to_and_stays_a_device() {
        use std::os::unix::fs::FileTypeExt as _;
        let dir = tempfile::tempdir().unwrap();
        let Some(device) = char_device(dir.path()) else {
            eprintln!("skipped: root without mknod, and /dev/null must not be risked");
            return;
        };
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&device, &link).unwrap();
        write_atomically(&device, b"gone").unwrap();
        write_atomically(&link, b"gone").unwrap();
        let kind = fs::symlink_metadata(&device).unwrap().file_type();
        assert!(kind.is_char_device());
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let mut left = names(dir.path());
        left.retain(|n| n != "null");
        assert_eq!(left, ["link"]);
    }
}
