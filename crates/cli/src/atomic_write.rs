//! Replacing a file so that a crash, a full disk or a failed write leaves either the old file or
//! the new one at its path, never a truncated mix.
//!
//! The bytes go to a new file in the same directory (a rename is only atomic within one file
//! system), which is flushed to disk and then renamed over the target; the directory is flushed
//! last so the rename itself survives a crash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Write `bytes` to `path` atomically: afterwards `path` holds exactly `bytes`, and if this fails
/// `path` still holds what it held before (no temporary file is left behind).
///
/// A `path` that is a symbolic link is resolved first, so the link stays and its target is
/// replaced (as a plain write would do). A replaced file keeps its permissions; a new one gets
/// the usual `0o666` less the umask.
///
/// # Errors
/// Any I/O error of creating, writing, flushing or renaming; `path`'s directory must exist.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
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
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp_path)
        {
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
    fn a_failed_rename_keeps_the_old_file_and_removes_the_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        // A non-empty directory at the target: the rename fails after the bytes were written.
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inside"), b"kept").unwrap();
        write_atomically(&target, b"x").unwrap_err();
        assert_eq!(fs::read(target.join("inside")).unwrap(), b"kept");
        assert_eq!(names(dir.path()), ["taken"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_stays_and_its_target_is_replaced_with_its_permissions() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        fs::write(&target, b"old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomically(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&target).unwrap(), b"new");
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }
}
