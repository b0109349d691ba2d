//! Opening beneath the workspace root, so that what happens after a check cannot matter.
//!
//! [`super::resolve`] judges a path and says how it escapes, but what it checked can change
//! before the tool opens it (a directory swapped for a symlink to `/`). So every open starts from
//! a descriptor of the root and lets the kernel keep it there: `openat2` with `RESOLVE_BENEATH`
//! fails with `EXDEV` when resolution would leave the root, whatever changed since the check.
//! Where `openat2` is missing (Linux before 5.6, or a seccomp filter answering `ENOSYS`), the
//! already resolved, symlink-free path is walked one component at a time with `O_NOFOLLOW`, so a
//! symlink that appears later is refused instead of followed.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

use super::{EscapeKind, FileError, PathError, WorkspacePath, resolve};

/// Retries of an `openat2` that answered `EAGAIN` (a concurrent rename while resolving `..`).
const EAGAIN_RETRIES: usize = 8;

/// Set once `openat2` answered `ENOSYS`, so later opens go straight to the component walk.
static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

/// An open descriptor of the workspace root; every confined open starts from it.
#[derive(Debug)]
pub struct RootDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl RootDir {
    /// Open the workspace root.
    ///
    /// # Errors
    /// [`PathError::Root`] when it is missing or not a directory.
    pub fn open(root: &Path) -> Result<RootDir, PathError> {
        let fd = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| PathError::Root {
            root: root.display().to_string(),
            cause: e.into(),
        })?;
        Ok(RootDir {
            fd,
            path: root.to_path_buf(),
        })
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`resolve`] `requested` against this root: the friendly judgement (which rule it broke)
    /// before the open that enforces it.
    ///
    /// # Errors
    /// As [`resolve`].
    pub fn resolve(&self, requested: &str) -> Result<WorkspacePath, PathError> {
        resolve(&self.path, requested)
    }

    /// Open `path` beneath the root with `flags` (`O_CLOEXEC` and `O_NOCTTY` are added).
    ///
    /// # Errors
    /// [`FileError::Path`] when the open would leave the root; [`FileError::Io`] otherwise.
    pub fn open_beneath(&self, path: &WorkspacePath, flags: OFlags) -> Result<OwnedFd, FileError> {
        open_beneath(self.fd.as_fd(), &path.relative, flags)
            .map_err(|e| open_error(&path.relative, e))
    }

    /// Open a regular file for reading, without blocking on a FIFO or a device: it is opened
    /// `O_NONBLOCK` and checked with `fstat` before anything is read.
    ///
    /// # Errors
    /// [`FileError::IsDirectory`], [`FileError::NotRegular`], or as [`RootDir::open_beneath`].
    pub fn open_regular(&self, path: &WorkspacePath) -> Result<(File, Stat), FileError> {
        let fd = self.open_beneath(path, OFlags::RDONLY | OFlags::NONBLOCK)?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| FileError::io(&path.relative, e))?;
        check_regular(&path.relative, &stat)?;
        Ok((File::from(fd), stat))
    }

    /// Open a directory beneath the root.
    ///
    /// # Errors
    /// [`FileError::NotADirectory`], or as [`RootDir::open_beneath`].
    pub fn open_dir(&self, path: &WorkspacePath) -> Result<OwnedFd, FileError> {
        match self.open_beneath(path, OFlags::RDONLY | OFlags::DIRECTORY) {
            Err(FileError::Io { cause, .. })
                if cause.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) =>
            {
                Err(FileError::NotADirectory {
                    path: path.relative.clone(),
                })
            }
            other => other,
        }
    }

    /// The directory that holds `path`, created (with its missing parents) when `create`; and
    /// the file's name in it. Each component is opened `O_NOFOLLOW` from the one before it.
    ///
    /// # Errors
    /// [`FileError::IsDirectory`] for the root itself, [`FileError::Path`] when a component has
    /// become a symlink, [`FileError::Io`] otherwise.
    pub(crate) fn parent_of<'p>(
        &self,
        path: &'p WorkspacePath,
        create: bool,
    ) -> Result<(OwnedFd, &'p str), FileError> {
        let relative = path.relative.as_str();
        let (parents, name) = match relative.rsplit_once('/') {
            Some((parents, name)) => (parents, name),
            None => ("", relative),
        };
        if name.is_empty() || name == "." || name == ".." {
            return Err(FileError::IsDirectory {
                path: relative.to_string(),
            });
        }
        let mut dir = rustix::fs::openat(
            &self.fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| FileError::io(relative, e))?;
        for part in parents.split('/').filter(|p| !p.is_empty() && *p != ".") {
            dir = open_subdir(dir.as_fd(), part, create).map_err(|e| open_error(relative, e))?;
        }
        Ok((dir, name))
    }
}

/// Refuse anything but a regular file, naming what it is.
pub(crate) fn check_regular(path: &str, stat: &Stat) -> Result<(), FileError> {
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(()),
        FileType::Directory => Err(FileError::IsDirectory {
            path: path.to_string(),
        }),
        other => Err(FileError::NotRegular {
            path: path.to_string(),
            kind: file_type_name(other),
        }),
    }
}

/// What a non-regular file is, in words.
fn file_type_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Symlink => "symlink",
        FileType::Directory => "directory",
        FileType::RegularFile => "regular file",
        _ => "special file",
    }
}

/// `EXDEV` (resolution left the root) and `ELOOP` (a component became a symlink under
/// `O_NOFOLLOW`) are escapes; the rest is I/O.
fn open_error(relative: &str, e: Errno) -> FileError {
    if e == Errno::XDEV || e == Errno::LOOP {
        FileError::Path(PathError::Escape {
            requested: relative.to_string(),
            kind: EscapeKind::Symlink,
        })
    } else {
        FileError::io(relative, e)
    }
}

/// Open `relative` (a root-relative path without `..`) beneath `root`.
pub(crate) fn open_beneath(
    root: BorrowedFd<'_>,
    relative: &str,
    flags: OFlags,
) -> Result<OwnedFd, Errno> {
    let flags = flags | OFlags::CLOEXEC | OFlags::NOCTTY;
    if !OPENAT2_MISSING.load(Ordering::Relaxed) {
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(root, relative, flags, Mode::empty(), resolve) {
                Err(Errno::AGAIN) if tries < EAGAIN_RETRIES => tries += 1,
                Err(Errno::NOSYS) => {
                    OPENAT2_MISSING.store(true, Ordering::Relaxed);
                    break;
                }
                done => return done,
            }
        }
    }
    open_component_wise(root, relative, flags)
}

/// The fallback: each component opened from the one before it with `O_NOFOLLOW`, so no symlink
/// is followed at all (the path came from [`resolve`], which already replaced the workspace's own
/// symlinks by their targets).
pub(crate) fn open_component_wise(
    root: BorrowedFd<'_>,
    relative: &str,
    flags: OFlags,
) -> Result<OwnedFd, Errno> {
    let parts: Vec<&str> = relative
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return Err(Errno::XDEV);
    }
    let Some((last, dirs)) = parts.split_last() else {
        return rustix::fs::openat(root, ".", flags, Mode::empty());
    };
    let mut dir: Option<OwnedFd> = None;
    for part in dirs {
        let at = dir.as_ref().map_or(root, AsFd::as_fd);
        dir = Some(open_subdir(at, part, false)?);
    }
    let at = dir.as_ref().map_or(root, AsFd::as_fd);
    rustix::fs::openat(at, *last, flags | OFlags::NOFOLLOW, Mode::empty())
        .map_err(|e| symlink_means_escape(at, last, e))
}

/// Open directory `name` in `at` without following a symlink; create it first when `create`.
fn open_subdir(at: BorrowedFd<'_>, name: &str, create: bool) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(at, name, flags, Mode::empty()) {
        Err(Errno::NOENT) if create => {
            match rustix::fs::mkdirat(at, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e),
            }
            rustix::fs::openat(at, name, flags, Mode::empty())
                .map_err(|e| symlink_means_escape(at, name, e))
        }
        other => other.map_err(|e| symlink_means_escape(at, name, e)),
    }
}

/// A component refused with `ELOOP`/`ENOTDIR` because it is a symlink: that is an escape
/// attempt (`EXDEV`), not a missing directory.
fn symlink_means_escape(at: BorrowedFd<'_>, name: &str, e: Errno) -> Errno {
    if e != Errno::LOOP && e != Errno::NOTDIR {
        return e;
    }
    match rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink => Errno::XDEV,
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn the_component_walk_refuses_a_symlink_anywhere_in_the_path() {
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("ws");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/f.txt"), "inside").unwrap();
        std::fs::create_dir(parent.path().join("outside")).unwrap();
        std::fs::write(parent.path().join("outside/f.txt"), "secret").unwrap();
        symlink(parent.path().join("outside"), root.join("out")).unwrap();
        symlink(parent.path().join("outside/f.txt"), root.join("link.txt")).unwrap();
        let dir = RootDir::open(&root).unwrap();
        let fd = dir.fd.as_fd();
        assert!(open_component_wise(fd, "d/f.txt", OFlags::RDONLY).is_ok());
        assert_eq!(
            open_component_wise(fd, "out/f.txt", OFlags::RDONLY).unwrap_err(),
            Errno::XDEV
        );
        assert_eq!(
            open_component_wise(fd, "link.txt", OFlags::RDONLY).unwrap_err(),
            Errno::XDEV
        );
        assert_eq!(
            open_component_wise(fd, "d/../../outside/f.txt", OFlags::RDONLY).unwrap_err(),
            Errno::XDEV
        );
        // openat2 refuses the same paths with EXDEV.
        assert_eq!(
            open_beneath(fd, "out/f.txt", OFlags::RDONLY).unwrap_err(),
            Errno::XDEV
        );
    }
}
