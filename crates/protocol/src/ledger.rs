//! The file ledger: every file operation an agent's tools performed.
//!
//! Compaction uses it to name what was read and modified long after the content itself has been
//! masked or summarized, so the lists are computed from facts, never from a model's text.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// What a tool did to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileAccess {
    /// Read (whole or a line range).
    Read,
    /// Created or overwritten.
    Written,
    /// Changed in place.
    Edited,
}

impl FileAccess {
    /// Whether this access changed the file.
    pub fn is_modification(self) -> bool {
        matches!(self, FileAccess::Written | FileAccess::Edited)
    }
}

/// One recorded file operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The path, relative to the workspace root where possible, with `/` separators.
    pub path: String,
    /// What was done.
    pub access: FileAccess,
    /// The 1-based inclusive line range touched, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<(usize, usize)>,
    /// The file's line count after the operation, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_count: Option<usize>,
    /// Hex sha256 of the file's content after the operation, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The tool call that did it, when it came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl LedgerEntry {
    /// An entry stamped with the current time and nothing optional filled in.
    pub fn new(path: impl Into<String>, access: FileAccess) -> Self {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        LedgerEntry {
            path: path.into(),
            access,
            lines: None,
            line_count: None,
            sha256: None,
            at_ms,
            tool_call_id: None,
        }
    }

    /// With the tool call that did it.
    pub fn with_call(mut self, tool_call_id: impl Into<String>) -> Self {
        self.tool_call_id = Some(tool_call_id.into());
        self
    }

    /// With the line range touched.
    pub fn with_lines(mut self, start: usize, end: usize) -> Self {
        self.lines = Some((start, end));
        self
    }

    /// With the file's line count.
    pub fn with_line_count(mut self, n: usize) -> Self {
        self.line_count = Some(n);
        self
    }

    /// With the file's sha256 (hex).
    pub fn with_sha256(mut self, hex: impl Into<String>) -> Self {
        self.sha256 = Some(hex.into());
        self
    }
}

/// Every file operation, in the order they happened.
///
/// ```
/// use troupe_protocol::{FileAccess, FileLedger, LedgerEntry};
/// let mut ledger = FileLedger::default();
/// ledger.record(LedgerEntry::new("src/a.rs", FileAccess::Read));
/// ledger.record(LedgerEntry::new("src/b.rs", FileAccess::Read));
/// ledger.record(LedgerEntry::new("src/b.rs", FileAccess::Edited));
/// assert_eq!(ledger.read_only_files().into_iter().collect::<Vec<_>>(), ["src/a.rs"]);
/// assert_eq!(ledger.modified_files().into_iter().collect::<Vec<_>>(), ["src/b.rs"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FileLedger {
    entries: Vec<LedgerEntry>,
}

impl FileLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one operation.
    pub fn record(&mut self, entry: LedgerEntry) {
        self.entries.push(entry);
    }

    /// All entries in order.
    pub fn entries(&self) -> &[LedgerEntry] {
        &self.entries
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries recorded for one tool call.
    pub fn for_call<'a>(
        &'a self,
        tool_call_id: &'a str,
    ) -> impl Iterator<Item = &'a LedgerEntry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.tool_call_id.as_deref() == Some(tool_call_id))
    }

    /// Files that were modified (written or edited), sorted.
    pub fn modified_files(&self) -> BTreeSet<String> {
        self.entries
            .iter()
            .filter(|e| e.access.is_modification())
            .map(|e| e.path.clone())
            .collect()
    }

    /// Files that were read and never modified, sorted.
    pub fn read_only_files(&self) -> BTreeSet<String> {
        let modified = self.modified_files();
        self.entries
            .iter()
            .filter(|e| e.access == FileAccess::Read && !modified.contains(&e.path))
            .map(|e| e.path.clone())
            .collect()
    }

    /// Every file touched in any way, sorted.
    pub fn all_files(&self) -> BTreeSet<String> {
        self.entries.iter().map(|e| e.path.clone()).collect()
    }

    /// Append another ledger's entries (e.g. one restored from a session).
    pub fn extend(&mut self, other: &FileLedger) {
        self.entries.extend(other.entries.iter().cloned());
    }
}

/// A [`FileLedger`] shared by every tool call of one agent; cheap to clone, all clones record
/// into the same ledger.
///
/// Tools run concurrently, so the ledger sits behind a lock; the lock is held only to push or copy
/// entries, never across an `.await`.
#[derive(Debug, Clone, Default)]
pub struct SharedLedger(Arc<Mutex<FileLedger>>);

impl SharedLedger {
    /// An empty shared ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// A shared ledger that starts from `ledger` (e.g. one restored from a session).
    pub fn from_ledger(ledger: FileLedger) -> Self {
        SharedLedger(Arc::new(Mutex::new(ledger)))
    }

    /// Record one operation.
    pub fn record(&self, entry: LedgerEntry) {
        self.lock().record(entry);
    }

    /// A copy of the ledger as it is now.
    pub fn snapshot(&self) -> FileLedger {
        self.lock().clone()
    }

    /// The entries recorded from position `start` on (what a copy of the first `start`
    /// entries lacks), without copying the rest.
    pub fn entries_from(&self, start: usize) -> Vec<LedgerEntry> {
        self.lock()
            .entries()
            .get(start..)
            .unwrap_or_default()
            .to_vec()
    }

    /// Replace the whole ledger (e.g. after a session was restored).
    pub fn replace(&self, ledger: FileLedger) {
        *self.lock() = ledger;
    }

    /// Number of recorded entries.
    pub fn len(&self) -> usize {
        self.lock().entries().len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, FileLedger> {
        // A panic while holding the lock cannot leave a Vec push half-done, so the data is
        // still consistent: recover it instead of poisoning every later tool call.
        crate::sync::lock(&self.0)
    }
}
