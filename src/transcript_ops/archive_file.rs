//! The archive file of a compacted transcript: a header line, then archive entries.

use std::path::Path;

use serde::{Deserialize, Serialize};
use troupe_compaction::Archive;
use troupe_runtime::MessageId;

use super::TranscriptOpError;

/// The first line of an archive file written by `troupe compact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchiveHeader {
    /// Always `"troupe.compacted_transcript"`: says what the file is.
    pub format: String,
    /// Format version (1).
    pub version: u32,
    /// The ids of the compacted transcript's messages, in order.
    pub ids: Vec<MessageId>,
    /// sha256 of the compacted transcript file.
    pub compacted_sha256: String,
    /// sha256 of the original transcript file.
    pub original_sha256: String,
}

/// The header's `format` value.
pub const ARCHIVE_FORMAT: &str = "troupe.compacted_transcript";

/// Write `header` and `archive` to `path`.
///
/// # Errors
/// [`TranscriptOpError::Archive`] when serializing or writing fails.
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
    std::fs::write(path, text).map_err(|e| fail(e.to_string()))
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
    // Archive line numbers count from the second line of the file.
    let archive = Archive::from_jsonl(rest).map_err(|e| match e {
        troupe_compaction::ArchiveError::BadLine { line, source } => {
            fail(format!("line {}: {source}", line + 1))
        }
        other => fail(other.to_string()),
    })?;
    Ok((header, archive))
}
