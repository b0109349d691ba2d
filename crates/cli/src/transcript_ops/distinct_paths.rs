//! Refusing an output path that is one of the inputs (or another output) under another name.
//!
//! `troupe compact --out IN.json` would replace the only copy of the originals with their
//! compacted form, so every path an operation reads or writes must name a different file. Two
//! paths name the same file when they resolve to the same (device, inode) — which catches hard
//! links, symbolic links and other spellings — or, for a file that does not exist yet, when they
//! resolve to the same place in the same directory.

use std::path::{Path, PathBuf};

use super::TranscriptOpError;

/// Which file a path names, as far as the file system can tell before anything is written.
#[derive(Debug, PartialEq, Eq)]
enum FileIdentity {
    /// An existing file (symbolic links followed).
    #[cfg(unix)]
    Inode { device: u64, inode: u64 },
    /// A file that does not exist yet, or any file where inodes are unknown: its absolute path
    /// with the directory resolved.
    Location(PathBuf),
}

fn identity(path: &Path) -> FileIdentity {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::MetadataExt as _;
        return FileIdentity::Inode {
            device: meta.dev(),
            inode: meta.ino(),
        };
    }
    if let Ok(resolved) = std::fs::canonicalize(path) {
        return FileIdentity::Location(resolved);
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let resolved = match (absolute.parent(), absolute.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|dir| dir.join(name))
            .unwrap_or_else(|_| absolute.clone()),
        _ => absolute.clone(),
    };
    FileIdentity::Location(resolved)
}

/// Check that the `(role, path)` pairs name pairwise different files.
///
/// # Errors
/// [`TranscriptOpError::SameFile`] naming the first two roles whose paths are one file.
pub fn ensure_distinct_files(paths: &[(&str, &Path)]) -> Result<(), TranscriptOpError> {
    let identities: Vec<FileIdentity> = paths.iter().map(|(_, p)| identity(p)).collect();
    for (i, first) in identities.iter().enumerate() {
        for (j, second) in identities.iter().enumerate().skip(i + 1) {
            if first == second {
                return Err(TranscriptOpError::SameFile {
                    first: paths[i].0.to_string(),
                    first_path: paths[i].1.to_path_buf(),
                    second: paths[j].0.to_string(),
                    second_path: paths[j].1.to_path_buf(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn other_spellings_and_links_of_one_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.json");
        std::fs::write(&input, "x").unwrap();
        let hard = dir.path().join("hard.json");
        std::fs::hard_link(&input, &hard).unwrap();
        let dotted = dir.path().join(".").join("in.json");
        for alias in [&input, &hard, &dotted] {
            let err =
                ensure_distinct_files(&[("the input", &input), ("--out", alias)]).unwrap_err();
            assert!(err.to_string().contains("same file"), "{err}");
        }
        #[cfg(unix)]
        {
            let soft = dir.path().join("soft.json");
            std::os::unix::fs::symlink(&input, &soft).unwrap();
            ensure_distinct_files(&[("the input", &input), ("--out", &soft)]).unwrap_err();
        }
    }

    #[test]
    fn files_that_do_not_exist_yet_are_compared_by_location() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.json");
        let same = dir.path().join("sub/../out.json");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let err = ensure_distinct_files(&[("--out", &out), ("--archive", &same)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "--out {} and --archive {} are the same file; give each its own path",
                out.display(),
                same.display()
            )
        );
        let other = dir.path().join("out.archive.jsonl");
        ensure_distinct_files(&[("--out", &out), ("--archive", &other)]).unwrap();
    }
}
