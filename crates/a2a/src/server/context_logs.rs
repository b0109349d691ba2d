//! The session logs of one served agent's A2A contexts
//! (`{stem}.a2a/{caller as hex}/{contextId as hex}.jsonl`),
//! bounded on disk: a caller inventing a contextId per message would otherwise add a log each
//! time, never removed. At most `max` logs are kept; a new context past that removes the least
//! recently used log of a context that is not live (its agent retired), and a log at
//! `max_bytes` takes no more tasks. So the disk a served agent's contexts use is at most
//! `max × max_bytes`, plus what the last task of each added before its log was checked again.
//!
//! Removing the oldest rather than refusing new contexts: a refusal at the cap would let one
//! caller that fills it shut every later caller out for good; removal costs only conversations
//! idle longest, and a message to one of those is told it has ended.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The context logs of one served agent, by last use.
pub(crate) struct ContextLogs {
    /// The served agent's own log, which the context logs sit beside.
    session: PathBuf,
    max: usize,
    max_bytes: u64,
    /// Each kept log with the tick of its last use (higher: more recent).
    used: HashMap<PathBuf, u64>,
    tick: u64,
}

impl ContextLogs {
    /// The logs already beside `session` (a restarted server's: each caller's folder, and the
    /// folder itself, where a troupe before callers had keys kept them, never resumed now but
    /// counted and removed in turn), oldest first by modification time; those past `max` are
    /// removed now.
    pub(crate) fn open(session: &Path, max: usize, max_bytes: u64) -> Self {
        let mut logs = ContextLogs {
            session: session.to_path_buf(),
            max: max.max(1),
            max_bytes,
            used: HashMap::new(),
            tick: 0,
        };
        let dir = logs.dir();
        let entries = |dir: &Path| -> Vec<PathBuf> {
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| entry.path())
                .collect()
        };
        let top = entries(&dir);
        let mut found: Vec<(std::time::SystemTime, PathBuf)> = top
            .iter()
            .filter(|path| path.is_dir() && !path.is_symlink())
            .flat_map(|caller| entries(caller))
            .chain(top.iter().cloned())
            .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
            .filter_map(|path| {
                let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
                Some((modified, path))
            })
            .collect();
        found.sort();
        let excess = found.len().saturating_sub(logs.max);
        for (_, path) in found.drain(..excess) {
            remove(&path);
        }
        for (_, path) in found {
            logs.touch(&path);
        }
        logs
    }

    /// The folder the context logs are in.
    fn dir(&self) -> PathBuf {
        let stem = self
            .session
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "agent".into());
        self.session.with_file_name(format!("{stem}.a2a"))
    }

    /// The log of `caller`'s `context`: hex, so any name or id names a file with no path in
    /// it, no two alike.
    pub(crate) fn path(&self, caller: &str, context: &str) -> PathBuf {
        self.dir()
            .join(hex(caller))
            .join(format!("{}.jsonl", hex(context)))
    }

    /// Whether `log` is kept (on disk, within the cap).
    pub(crate) fn kept(&self, log: &Path) -> bool {
        self.used.contains_key(log) && log.exists()
    }

    /// Whether `log` has reached the byte cap.
    pub(crate) fn full(&self, log: &Path) -> bool {
        std::fs::metadata(log).is_ok_and(|m| m.len() >= self.max_bytes)
    }

    /// The byte cap.
    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The cap on logs.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// `log` was used now.
    pub(crate) fn touch(&mut self, log: &Path) {
        self.tick += 1;
        self.used.insert(log.to_path_buf(), self.tick);
    }

    /// Room for one more log: at the cap, the least recently used one `live` does not hold is
    /// removed. `false` when every kept log is live.
    pub(crate) fn make_room(&mut self, live: impl Fn(&Path) -> bool) -> bool {
        self.used.retain(|path, _| path.exists());
        if self.used.len() < self.max {
            return true;
        }
        let oldest = self
            .used
            .iter()
            .filter(|(path, _)| !live(path))
            .min_by_key(|(_, tick)| **tick)
            .map(|(path, _)| path.clone());
        match oldest {
            Some(path) => {
                self.used.remove(&path);
                remove(&path);
                true
            }
            None => false,
        }
    }
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Remove a context's log and its lock note.
fn remove(log: &Path) {
    for path in [log.to_path_buf(), troupe_session::lock_path(log)] {
        match std::fs::remove_file(&path) {
            Ok(()) => tracing::debug!(log = %path.display(), "removed an A2A context's log"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(log = %path.display(), "could not remove an A2A context's log: {e}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contexts_log_is_beside_the_agents_and_named_without_a_path_in_it() {
        let logs = ContextLogs::open(Path::new("/nonexistent/s/helper.jsonl"), 10, 10);
        assert_eq!(
            logs.path("../a", "../x"),
            PathBuf::from("/nonexistent/s/helper.a2a/2e2e2f61/2e2e2f78.jsonl")
        );
        let longest = "x".repeat(super::super::contexts::MAX_CONTEXT_ID_BYTES);
        let caller = "c".repeat(super::super::auth::MAX_CALLER_BYTES);
        let name = logs.path(&caller, &longest);
        assert!(name.file_name().unwrap().len() <= 255);
        assert!(name.parent().unwrap().file_name().unwrap().len() <= 255);
    }
}
