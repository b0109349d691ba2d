//! The file-system side of a log: opening only regular files, and creating directories durably.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::error::SessionError;

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> SessionError + '_ {
    move |source| SessionError::Io {
        path: path.to_path_buf(),
        cause: source,
    }
}

/// What a non-regular file is, in words for an error message.
fn kind_of(metadata: &std::fs::Metadata) -> &'static str {
    let file_type = metadata.file_type();
    if file_type.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return "a device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

fn require_regular(path: &Path, metadata: &std::fs::Metadata) -> Result<(), SessionError> {
    if metadata.is_file() {
        Ok(())
    } else {
        Err(SessionError::NotRegularFile {
            path: path.to_path_buf(),
            kind: kind_of(metadata),
        })
    }
}

/// Refuse `path` if it exists and is not a regular file (checked before anything else is done
/// for it, such as creating its lock file next to it).
pub(super) fn refuse_irregular(path: &Path) -> Result<(), SessionError> {
    match std::fs::metadata(path) {
        Ok(metadata) => require_regular(path, &metadata),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error(path)(e)),
    }
}

/// Open `path` with `options`, refusing anything but a regular file (symlinks to one are fine);
/// a file it creates is `0o600` on Unix.
///
/// The path is checked before it is opened, and the opened file again (the path may have been
/// swapped in between). The open itself is non-blocking, so even a FIFO swapped in at that
/// moment cannot hang the caller waiting for a writer.
pub(super) fn open_regular(path: &Path, options: &mut OpenOptions) -> Result<File, SessionError> {
    refuse_irregular(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // The flag's bits fit an `i32` (`O_NONBLOCK` is a small positive constant).
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
        // A new log or pid note is private (a log holds whole conversations); an existing
        // file's mode is left as it is.
        options.mode(0o600);
    }
    let file = options.open(path).map_err(io_error(path))?;
    require_regular(path, &file.metadata().map_err(io_error(path))?)?;
    Ok(file)
}

/// Open (creating it `0o600`) the pid note at `path`, a file troupe names and writes itself
/// beside a log, for reading and writing — following no symbolic link.
///
/// A log named by a user may be a link (it is the same session, see `lock.rs`), but a note is
/// troupe's own: a link planted in its place, or a hard link of another file, would have troupe
/// truncate and write over the file it names. Such a note, or one that is not a regular file,
/// is refused with [`SessionError::UnsafeLockNote`] before anything is written. The open does
/// not block (a FIFO swapped in is refused, never waited on).
pub(super) fn open_own_note(path: &Path) -> Result<File, SessionError> {
    let refused = |kind| SessionError::UnsafeLockNote {
        path: path.to_path_buf(),
        kind,
    };
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true);
    #[cfg(unix)]
    {
        use rustix::fs::OFlags;
        use std::os::unix::fs::OpenOptionsExt as _;
        // The flags' bits fit an `i32` (small positive constants).
        options.custom_flags((OFlags::NONBLOCK | OFlags::NOFOLLOW).bits() as i32);
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refused("a symbolic link"));
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            return refused("a symbolic link");
        }
        io_error(path)(e)
    })?;
    let metadata = file.metadata().map_err(io_error(path))?;
    if !metadata.is_file() {
        return Err(refused(kind_of(&metadata)));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if metadata.nlink() > 1 {
            return Err(refused("a hard link of another file"));
        }
    }
    Ok(file)
}

/// The directory a path's entry lives in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Create `dir` and its missing ancestors, then fsync each created directory and the existing
/// one it was created in, so that a new log's path survives a crash along with its contents.
pub(super) fn create_dirs_durably(dir: &Path) -> Result<(), SessionError> {
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut current = dir;
    loop {
        match std::fs::metadata(current) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(current.to_path_buf());
                let parent = parent_dir(current);
                if parent == current {
                    break;
                }
                current = parent;
            }
            Err(e) => return Err(io_error(current)(e)),
        }
    }
    let Some(topmost) = missing.last() else {
        return Ok(());
    };
    let existing = parent_dir(topmost).to_path_buf();
    for created in missing.iter().rev() {
        match std::fs::create_dir(created) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error(created)(e)),
        }
    }
    sync_dir(&existing)?;
    for created in &missing {
        sync_dir(created)?;
    }
    Ok(())
}

/// Make the entry of a newly created `path` durable: fsync the directory holding it.
pub(super) fn sync_parent_dir(path: &Path) -> Result<(), SessionError> {
    sync_dir(parent_dir(path))
}

/// fsync a directory (Unix; elsewhere directories cannot be opened as files, and entries are
/// made durable by the file system itself).
fn sync_dir(dir: &Path) -> Result<(), SessionError> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_error(dir))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// The whole of the regular file at `path` (a FIFO, device or directory refused unread, as
/// [`open_regular`] does): what loading and listing a log read.
pub(super) fn read_regular(path: &Path) -> Result<Vec<u8>, SessionError> {
    let mut bytes = Vec::new();
    open_regular(path, OpenOptions::new().read(true))?
        .read_to_end(&mut bytes)
        .map_err(|source| SessionError::Io {
            path: path.to_path_buf(),
            cause: source,
        })?;
    Ok(bytes)
}
