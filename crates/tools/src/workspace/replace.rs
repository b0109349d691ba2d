//! Replacing a file's content beneath the root: a temporary file in the same directory, then
//! `renameat` over the old name, so a reader sees the old or the new content, never half.

use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Access, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::root_dir::check_regular;
use super::{EscapeKind, FileError, PathError, RootDir, WorkspacePath};

/// Makes temporary names unique within the process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl RootDir {
    /// Write `content` to `path` atomically, creating missing parent directories; returns
    /// whether the file is new.
    ///
    /// An existing file must be a regular file with one link (its other names may be outside
    /// the root); it keeps its permission bits. The temporary file is created `O_EXCL` and
    /// `O_NOFOLLOW` in the directory opened beneath the root, and renamed within it.
    ///
    /// # Errors
    /// [`FileError::Path`] when a component has become a symlink, [`FileError::IsDirectory`],
    /// [`FileError::NotRegular`], [`FileError::HardLinked`], or [`FileError::Io`].
    pub fn write_atomically(
        &self,
        path: &WorkspacePath,
        content: &[u8],
    ) -> Result<bool, FileError> {
        let relative = path.relative.as_str();
        let (dir, name) = self.parent_of(path, true)?;
        let existing = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Some(stat),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(FileError::io(relative, e)),
        };
        let mode = match &existing {
            Some(stat) => {
                if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
                    // `resolve` followed the workspace's own links; one here now was swapped in.
                    return Err(FileError::Path(PathError::Escape {
                        requested: relative.to_string(),
                        kind: EscapeKind::Symlink,
                    }));
                }
                check_regular(relative, stat)?;
                check_single_link(relative, stat.st_nlink)?;
                // The rename would replace a read-only file too; refuse as a plain write would.
                rustix::fs::accessat(&dir, name, Access::WRITE_OK, AtFlags::empty())
                    .map_err(|e| FileError::io(relative, e))?;
                Some(Mode::from_raw_mode(stat.st_mode))
            }
            None => None,
        };
        let temp = format!(
            ".{name}.troupe-{}-{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let written = write_temp(&dir, &temp, mode, content)
            .and_then(|()| rustix::fs::renameat(&dir, temp.as_str(), &dir, name));
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir, temp.as_str(), AtFlags::empty());
            return Err(FileError::io(relative, e));
        }
        // The rename is durable once the directory is; a failed fsync here loses nothing.
        let _ = rustix::fs::fsync(&dir);
        Ok(existing.is_none())
    }
}

/// Refuse a file that has other names.
pub(crate) fn check_single_link(path: &str, links: impl Into<u64>) -> Result<(), FileError> {
    let links = links.into();
    if links > 1 {
        Err(FileError::HardLinked {
            path: path.to_string(),
            links,
        })
    } else {
        Ok(())
    }
}

/// Create `temp` in `dir` and fill it; `mode` is the replaced file's, else the default that
/// the umask narrows.
fn write_temp(dir: &OwnedFd, temp: &str, mode: Option<Mode>, content: &[u8]) -> Result<(), Errno> {
    let fd = rustix::fs::openat(
        dir.as_fd(),
        temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )?;
    if let Some(mode) = mode {
        rustix::fs::fchmod(&fd, mode)?;
    }
    let mut file = std::fs::File::from(fd);
    file.write_all(content)
        .and_then(|()| file.sync_all())
        .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))
}
