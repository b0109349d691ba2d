//! A confined command's own temporary directory: created for the call (mode 0700) under the
//! system's temporary directory, given as `TMPDIR`, writable under `workspace-write`, removed
//! with everything in it when the call ends. The rest of `/tmp` stays read-only, so nothing a
//! command leaves there outlives it or reaches another program.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The directory; removed when dropped.
#[derive(Debug)]
pub(super) struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    /// A new, empty directory of this process's.
    pub(super) fn create() -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        let pid = std::process::id();
        let mut last = None;
        // A name taken (a crashed process of the same pid left it) is skipped, never reused.
        for _ in 0..16 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let path = base.join(format!("troupe-sandbox-{pid}-{n}-{nanos:08x}"));
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&path) {
                Ok(()) => {
                    // Canonical, so the Landlock rule and TMPDIR name the same directory.
                    let path = path.canonicalize()?;
                    return Ok(PrivateTmp { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        // What the command left there goes with it (symbolic links are removed, not followed).
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
