//! What `troupe compact`, `troupe expand` and `troupe replay` do, as library functions.
//!
//! A transcript on disk has no troupe message ids, yet the archive that makes compaction
//! lossless is keyed by them. So the archive file written next to a compacted transcript starts
//! with a header line ([`ArchiveHeader`]) naming the ids of the compacted messages in order and
//! the sha256 of the original and compacted files; the remaining lines are the compaction
//! crate's archive entries.

mod archive_file;
mod compact;
mod replay;

pub use archive_file::{ArchiveHeader, read_archive_file, write_archive_file};
pub use compact::{CompactRequest, CompactedTranscript, compact_transcript, expand_transcript};
pub use replay::{ReplayReport, ReplayRow, replay_transcript};

use std::path::PathBuf;

/// Why a transcript operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptOpError {
    /// Reading or writing a transcript.
    #[error(transparent)]
    Transcript(#[from] crate::transcript_file::TranscriptFileError),
    /// Reading or writing an archive file.
    #[error("archive {path}: {reason}")]
    Archive {
        /// The archive file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The options make no policy.
    #[error("bad options: {0}")]
    Options(String),
    /// Compaction itself failed.
    #[error(transparent)]
    Compaction(#[from] troupe_compaction::CompactionError),
    /// The archive does not fit the compacted transcript.
    #[error("cannot expand: {0}")]
    Expand(String),
}

/// The sha256 of `bytes`, as hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
