//! Reading a directory through its descriptor, for walks that never leave the root.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

/// One entry of a directory, described without following it.
pub(crate) struct DirEntry {
    /// The name as shown (lossily UTF-8).
    pub name: String,
    /// The name as the file system has it, for opening.
    pub raw: CString,
    /// `lstat` of the entry; `None` when it vanished while listing.
    pub stat: Option<Stat>,
}

impl DirEntry {
    /// What the entry is (a symlink is a symlink, never its target).
    pub(crate) fn kind(&self) -> Option<FileType> {
        self.stat
            .as_ref()
            .map(|s| FileType::from_raw_mode(s.st_mode))
    }

    /// Its size in bytes, 0 when unknown.
    pub(crate) fn size(&self) -> u64 {
        self.stat
            .as_ref()
            .map_or(0, |s| u64::try_from(s.st_size).unwrap_or(0))
    }
}

/// The entries of `dir` (without `.` and `..`), sorted by name.
pub(crate) fn sorted_entries(dir: &OwnedFd) -> Result<Vec<DirEntry>, Errno> {
    let mut entries = Vec::new();
    for entry in Dir::read_from(dir)? {
        let entry = entry?;
        let raw = entry.file_name().to_owned();
        if raw.as_bytes() == b"." || raw.as_bytes() == b".." {
            continue;
        }
        let stat = rustix::fs::statat(dir, raw.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).ok();
        entries.push(DirEntry {
            name: raw.to_string_lossy().into_owned(),
            raw,
            stat,
        });
    }
    entries.sort_by(|a, b| a.raw.cmp(&b.raw));
    Ok(entries)
}

/// Open `name` in `dir` without following a symlink and without blocking on a FIFO.
pub(crate) fn open_entry(dir: &OwnedFd, name: &CString, flags: OFlags) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir.as_fd(),
        name.as_c_str(),
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
}
