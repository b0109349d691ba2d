//! Troupe's own files, kept read-only for every confined command this process starts: its
//! session logs and their lock notes, the configuration it was started with. A policy's
//! writable roots may hold them (a session log beside the code, `troupe.toml` in the
//! workspace); a command must not rewrite the history troupe resumes from, nor the
//! configuration that chooses its sandbox.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use troupe_protocol::sync;

static PROTECTED: RwLock<BTreeSet<PathBuf>> = RwLock::new(BTreeSet::new());

/// Keep `path` read-only for every confined command started from now on (a file or a
/// directory; one that does not exist yet is kept once it does). Paths outside every writable
/// root need nothing: they are read-only already.
pub fn protect(path: impl AsRef<Path>) {
    let path = path.as_ref();
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    sync::write(&PROTECTED).insert(path);
}

/// The paths [`protect`] was given, in order.
pub fn protected() -> Vec<PathBuf> {
    sync::read(&PROTECTED).iter().cloned().collect()
}
