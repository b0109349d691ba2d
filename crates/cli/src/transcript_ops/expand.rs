//! Expanding a compacted transcript back to its original, verified against the checksums its
//! archive recorded at compaction.
//!
//! Two things are checked, each by file and by messages: that the compacted transcript is the
//! one the archive was written for, and that what comes out is the original. A difference in
//! messages is an error; a difference only in the file's layout or envelope (whitespace, key
//! order, `source`/`license`) passes and is reported as such.

use std::path::Path;

use troupe_compaction::{Archive, expand};
use troupe_protocol::ChatMessage;

use super::archive_file::{ArchiveHeader, read_archive_file};
use super::distinct_paths::ensure_distinct_files;
use super::{TranscriptOpError, sha256_hex};
use crate::atomic_write::write_atomically;
use crate::transcript_file::{TranscriptFile, TranscriptFileError};

/// sha256 of `messages` in their wire form (the OpenAI message JSON, compact, keys in troupe's
/// order): the same for the same messages whatever file layout they were read from.
///
/// # Errors
/// [`TranscriptOpError::Transcript`] only for a message serde cannot write.
pub fn messages_sha256(messages: &[ChatMessage]) -> Result<String, TranscriptOpError> {
    let bytes =
        serde_json::to_vec(messages).map_err(|e| TranscriptFileError::Serialize(e.to_string()))?;
    Ok(sha256_hex(&bytes))
}

/// How a restored transcript compares with the original.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoredMatch {
    /// Byte for byte the original file.
    IdenticalFile,
    /// Every message exactly the original's, in a file whose layout or envelope differs from
    /// the original's (because the compacted file's did, or troupe cannot reproduce the
    /// original's exact formatting).
    IdenticalMessages,
}

/// The verified original of a compacted transcript, ready to write.
#[derive(Debug, Clone)]
pub struct ExpandedTranscript {
    /// The restored transcript's text.
    pub text: String,
    /// How it compares with the original.
    pub restored: RestoredMatch,
    /// The compacted file differs from the one `troupe compact` wrote, in layout or envelope
    /// only (its messages are the same).
    pub compacted_layout_changed: bool,
}

impl ExpandedTranscript {
    /// Write the restored transcript to `out`, atomically.
    ///
    /// # Errors
    /// [`TranscriptOpError::Write`]; `out` is then unchanged.
    pub fn write(&self, out: &Path) -> Result<(), TranscriptOpError> {
        write_atomically(out, self.text.as_bytes()).map_err(|source| TranscriptOpError::Write {
            path: out.to_path_buf(),
            cause: source,
        })
    }
}

fn short(sum: &str) -> &str {
    sum.get(..12).unwrap_or(sum)
}

/// The one rule by which compacted messages are turned back into the original ones, shared by
/// `troupe expand` and `troupe mcp serve`'s `expand_transcript`: the messages must be exactly
/// the ones `header` was written for (the sha256 of their wire form, so an edited, dropped,
/// added or reordered message is refused), and what the archive restores must be exactly the
/// original messages (their recorded sha256). A version 1 header records no message checksums;
/// its caller must have checked the file's own checksum instead.
///
/// # Errors
/// [`TranscriptOpError::Expand`] saying which check failed.
pub fn restore_messages(
    header: &ArchiveHeader,
    archive: &Archive,
    compacted: &[ChatMessage],
) -> Result<Vec<ChatMessage>, TranscriptOpError> {
    let refuse = |what: String| Err(TranscriptOpError::Expand(what));
    if let Some(expected) = &header.compacted_messages_sha256 {
        let actual = messages_sha256(compacted)?;
        if &actual != expected {
            return refuse(format!(
                "these are not the compacted messages the archive was written for: the sha256 \
                 of the messages ({}…) differs from the one recorded at compaction ({}…); a \
                 message was edited, added, dropped or moved, or the archive belongs to another \
                 transcript",
                short(&actual),
                short(expected)
            ));
        }
    }
    if header.ids.len() != compacted.len() {
        return refuse(format!(
            "{} compacted messages but the archive describes {}: they do not belong together",
            compacted.len(),
            header.ids.len()
        ));
    }
    let messages: Vec<ChatMessage> = compacted
        .iter()
        .zip(&header.ids)
        .map(|(m, id)| ChatMessage {
            id: *id,
            ..m.clone()
        })
        .collect();
    let restored = expand(&messages, archive).map_err(|e| {
        TranscriptOpError::Expand(format!(
            "{e}: the archive was changed or belongs to another transcript"
        ))
    })?;
    if let Some(expected) = &header.original_messages_sha256 {
        let actual = messages_sha256(&restored)?;
        if &actual != expected {
            return refuse(format!(
                "the restored messages differ from the original's (sha256 {}…, recorded {}…): \
                 the archive was changed or belongs to another transcript",
                short(&actual),
                short(expected)
            ));
        }
    }
    Ok(restored)
}

/// Restore the original of the compacted transcript `compacted` from its archive file and
/// verify it. Nothing is written (see [`expand_transcript_file`]).
///
/// # Errors
/// [`TranscriptOpError::Expand`] when the compacted transcript is not the one the archive was
/// written for (its messages' checksum differs), when the archive does not restore the original
/// messages exactly (a changed, missing or foreign entry), or — for a version 1 archive, which
/// records file checksums only — when either file differs at all; other variants when a file
/// cannot be read.
pub fn expand_transcript(
    compacted: &Path,
    archive_path: &Path,
) -> Result<ExpandedTranscript, TranscriptOpError> {
    let text = std::fs::read_to_string(compacted).map_err(|source| TranscriptFileError::Io {
        path: compacted.to_path_buf(),
        cause: source,
    })?;
    let file = TranscriptFile::parse(compacted, &text)?;
    let (header, archive) = read_archive_file(archive_path)?;
    let refuse = |what: String| Err(TranscriptOpError::Expand(what));

    let compacted_layout_changed = sha256_hex(text.as_bytes()) != header.compacted_sha256;
    if compacted_layout_changed && header.compacted_messages_sha256.is_none() {
        return refuse(format!(
            "{} is not the file this archive was written for: its sha256 differs from the \
             one recorded at compaction ({}…), and a version 1 archive records no message \
             checksums to tell a reformatted file from a changed one",
            compacted.display(),
            short(&header.compacted_sha256)
        ));
    }
    let restored = restore_messages(&header, &archive, &file.messages).map_err(|e| match e {
        TranscriptOpError::Expand(what) => TranscriptOpError::Expand(format!(
            "{} with {}: {what}",
            compacted.display(),
            archive_path.display()
        )),
        other => other,
    })?;
    let out = TranscriptFile {
        messages: restored,
        ..file
    }
    .to_text()?;
    let identical_file = sha256_hex(out.as_bytes()) == header.original_sha256;
    let restored = match (&header.original_messages_sha256, identical_file) {
        (_, true) => RestoredMatch::IdenticalFile,
        (None, false) => {
            return refuse(format!(
                "the restored transcript's sha256 differs from the original's ({}…), and a \
                 version 1 archive records no message checksums to tell a layout difference \
                 from changed messages: {} may have been changed",
                short(&header.original_sha256),
                archive_path.display()
            ));
        }
        (Some(expected), false) => {
            // What a reader of the written file will get.
            let written = TranscriptFile::parse(compacted, &out)?;
            let actual = messages_sha256(&written.messages)?;
            if &actual != expected {
                return refuse(format!(
                    "the restored messages differ from the original's (sha256 {}…, recorded \
                     {}…): the archive {} was changed or belongs to another transcript",
                    short(&actual),
                    short(expected),
                    archive_path.display()
                ));
            }
            RestoredMatch::IdenticalMessages
        }
    };
    Ok(ExpandedTranscript {
        text: out,
        restored,
        compacted_layout_changed,
    })
}

/// [`expand_transcript`], then write the result to `out` atomically; `out` must be neither of
/// the inputs, and nothing is written unless the original messages were restored exactly.
///
/// # Errors
/// [`TranscriptOpError::SameFile`] before anything is read; as [`expand_transcript`] and
/// [`ExpandedTranscript::write`].
pub fn expand_transcript_file(
    compacted: &Path,
    archive_path: &Path,
    out: &Path,
) -> Result<ExpandedTranscript, TranscriptOpError> {
    ensure_distinct_files(&[
        ("the compacted transcript", compacted),
        ("--archive", archive_path),
        ("--out", out),
    ])?;
    let expanded = expand_transcript(compacted, archive_path)?;
    expanded.write(out)?;
    Ok(expanded)
}
