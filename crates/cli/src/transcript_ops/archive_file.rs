//! The archive file of a compacted transcript: a header line, then archive entries.

use std::path::Path;

use serde::{Deserialize, Serialize};
use troupe_compaction::Archive;
use troupe_protocol::MessageId;

use super::TranscriptOpError;
use crate::atomic_write::write_atomically;

/// The first line of an archive file written by `troupe compact`.
///
/// The file checksums say whether a file is byte-identical; the message checksums (version 2)
/// say whether the messages are, whatever the file's whitespace or envelope. So `expand` can
/// tell "messages restored exactly, layout differs" from "messages differ".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchiveHeader {
    /// Always `"troupe.compacted_transcript"`: says what the file is.
    pub format: String,
    /// Format version: [`ARCHIVE_VERSION`] when written; 1 (no message checksums) is still read.
    pub version: u32,
    /// The ids of the compacted transcript's messages, in order.
    pub ids: Vec<MessageId>,
    /// sha256 of the compacted transcript file.
    pub compacted_sha256: String,
    /// sha256 of the original transcript file.
    pub original_sha256: String,
    /// sha256 of the compacted transcript's messages (see `messages_sha256`); `None` in
    /// version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_messages_sha256: Option<String>,
    /// sha256 of the original transcript's messages; `None` in version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_messages_sha256: Option<String>,
}

/// The header's `format` value.
pub(super) const ARCHIVE_FORMAT: &str = "troupe.compacted_transcript";

/// The archive format version written now: 2 added the message checksums.
pub const ARCHIVE_VERSION: u32 = 2;

/// Write `header` and `archive` to `path`, atomically (see [`write_atomically`]).
///
/// # Errors
/// [`TranscriptOpError::Archive`] when serializing or writing fails; `path` is then unchanged.
pub fn write_archive_file(
    path: &Path,
    header: &ArchiveHeader,
    archive: &Archive,
) -> Result<(), TranscriptOpError> {
    let fail = |reason: String| TranscriptOpError::Archive {
        path: path.to_path_buf(),
        reason,
    };
    let mut text = serde_json::to_string(header).map_err(|e| fail(e.to_string()))?;
    text.push('\n');
    text.push_str(&archive.to_jsonl().map_err(|e| fail(e.to_string()))?);
    write_atomically(path, text.as_bytes()).map_err(|e| fail(e.to_string()))
}

/// Read an archive file written by [`write_archive_file`].
///
/// # Errors
/// [`TranscriptOpError::Archive`] naming what is wrong (line numbers are the file's).
pub fn read_archive_file(path: &Path) -> Result<(ArchiveHeader, Archive), TranscriptOpError> {
    let fail = |reason: String| TranscriptOpError::Archive {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let (first, rest) = text.split_once('\n').unwrap_or((text.as_str(), ""));
    let header: ArchiveHeader = serde_json::from_str(first)
        .map_err(|e| fail(format!("line 1 is not a troupe archive header: {e}")))?;
    if header.format != ARCHIVE_FORMAT {
        return Err(fail(format!(
            "line 1: format is `{}`, expected `{ARCHIVE_FORMAT}`",
            header.format
        )));
    }
    if !(1..=ARCHIVE_VERSION).contains(&header.version) {
        return Err(fail(format!(
            "line 1: version {} is not one this troupe reads (1 to {ARCHIVE_VERSION})",
            header.version
        )));
    }
    let has_message_sums =
        header.compacted_messages_sha256.is_some() && header.original_messages_sha256.is_some();
    if header.version >= 2 && !has_message_sums {
        return Err(fail(format!(
            "line 1: a version {} header must record compacted_messages_sha256 and original_messages_sha256",
            header.version
        )));
    }
    // Archive line numbers count from the second line of the file.
    let archive = Archive::from_jsonl(rest).map_err(|e| match e {
        troupe_compaction::ArchiveError::BadLine { line, cause } => {
            fail(format!("line {}: {cause}", line + 1))
        }
        other => fail(other.to_string()),
    })?;
    Ok((header, archive))
}
