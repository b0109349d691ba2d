//! The archives of this server's compactions, kept for `expand_transcript` within a bound: the
//! [`MAX_ARCHIVES`] most recently used, and fewer when together they would pass
//! [`MAX_ARCHIVE_BYTES`]. A server that compacts all day would otherwise keep every original it
//! was ever given.

use std::collections::HashMap;
use std::sync::Arc;

use troupe::compaction::Archive;
use troupe::protocol::ChatMessage;
use troupe_cli::transcript_ops::ArchiveHeader;

/// Archives kept at most.
pub(super) const MAX_ARCHIVES: usize = 32;
/// Bytes of archives kept at most (an estimate: the original's text and the compacted
/// messages'); the most recent archive is kept whatever its size.
pub(super) const MAX_ARCHIVE_BYTES: usize = 256 * 1024 * 1024;

const PREFIX: &str = "archive-";

/// One compaction, as `expand_transcript` needs it.
pub(super) struct Stored {
    /// Its ids and checksums; the compacted checksum is of the messages as the client got them.
    pub(super) header: ArchiveHeader,
    /// The compacted messages as the client got them (the default to expand).
    pub(super) compacted: Vec<ChatMessage>,
    /// The originals.
    pub(super) archive: Archive,
    /// Its estimated size in bytes.
    pub(super) bytes: usize,
}

struct Entry {
    stored: Arc<Stored>,
    last_used: u64,
}

/// The archives kept, by number.
#[derive(Default)]
pub(super) struct Archives {
    /// The number of the last archive stored (ids count up from 1).
    last: u64,
    /// Bumped on every use, to find the least recently used.
    clock: u64,
    bytes: usize,
    by_number: HashMap<u64, Entry>,
}

impl Archives {
    /// Keep `stored` and name it; the least recently used archives go when over the bounds.
    pub(super) fn insert(&mut self, stored: Stored) -> String {
        self.last += 1;
        self.clock += 1;
        self.bytes += stored.bytes;
        self.by_number.insert(
            self.last,
            Entry {
                stored: Arc::new(stored),
                last_used: self.clock,
            },
        );
        while self.by_number.len() > MAX_ARCHIVES
            || (self.bytes > MAX_ARCHIVE_BYTES && self.by_number.len() > 1)
        {
            let Some(oldest) = self
                .by_number
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(n, _)| *n)
            else {
                break;
            };
            if let Some(gone) = self.by_number.remove(&oldest) {
                self.bytes -= gone.stored.bytes;
            }
        }
        format!("{PREFIX}{}", self.last)
    }

    /// The archive named `id`, now the most recently used.
    ///
    /// # Errors
    /// Why there is none: never stored, or evicted (saying by which bound).
    pub(super) fn get(&mut self, id: &str) -> Result<Arc<Stored>, String> {
        let number = id.strip_prefix(PREFIX).and_then(|n| n.parse::<u64>().ok());
        self.clock += 1;
        if let Some(entry) = number.and_then(|n| self.by_number.get_mut(&n)) {
            entry.last_used = self.clock;
            return Ok(entry.stored.clone());
        }
        if number.is_some_and(|n| n >= 1 && n <= self.last) {
            return Err(format!(
                "archive `{id}` was evicted: this server keeps only the {MAX_ARCHIVES} most \
                 recently used archives, {MAX_ARCHIVE_BYTES} bytes at most together; compact \
                 the transcript again (or use `troupe compact`, which writes the archive to a \
                 file)"
            ));
        }
        let mut held: Vec<u64> = self.by_number.keys().copied().collect();
        held.sort_unstable();
        let held: Vec<String> = held.iter().map(|n| format!("{PREFIX}{n}")).collect();
        Err(format!(
            "no archive `{id}` (this server holds: {})",
            if held.is_empty() {
                "none".to_string()
            } else {
                held.join(", ")
            }
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn stored(bytes: usize) -> Stored {
        Stored {
            header: ArchiveHeader {
                format: String::new(),
                version: 2,
                ids: Vec::new(),
                compacted_sha256: String::new(),
                original_sha256: String::new(),
                compacted_messages_sha256: None,
                original_messages_sha256: None,
            },
            compacted: Vec::new(),
            archive: Archive::default(),
            bytes,
        }
    }

    /// Why there is no archive `id`.
    fn missing(archives: &mut Archives, id: &str) -> String {
        archives.get(id).err().unwrap()
    }

    #[test]
    fn the_least_recently_used_archive_goes_first() {
        let mut archives = Archives::default();
        let first = archives.insert(stored(1));
        let second = archives.insert(stored(1));
        for _ in 2..MAX_ARCHIVES {
            archives.insert(stored(1));
        }
        // Using the first makes the second the least recently used.
        archives.get(&first).unwrap();
        archives.insert(stored(1));
        assert!(archives.get(&first).is_ok());
        assert!(missing(&mut archives, &second).contains("evicted"));
        assert!(missing(&mut archives, "archive-999").contains("no archive"));
    }

    #[test]
    fn archives_are_bounded_in_bytes_but_the_newest_is_kept() {
        let mut archives = Archives::default();
        let small = archives.insert(stored(MAX_ARCHIVE_BYTES / 2));
        let large = archives.insert(stored(MAX_ARCHIVE_BYTES));
        assert!(missing(&mut archives, &small).contains("evicted"));
        assert!(archives.get(&large).is_ok());
    }
}
