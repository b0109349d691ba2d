//! What `troupe compact`, `troupe expand` and `troupe replay` do, as library functions.
//!
//! A transcript on disk has no troupe message ids, yet the archive that makes compaction
//! lossless is keyed by them. So the archive file written next to a compacted transcript starts
//! with a header line ([`ArchiveHeader`]) naming the ids of the compacted messages in order and
//! the sha256 of the original and compacted files and of their messages; the remaining lines are
//! the compaction crate's archive entries.
//!
//! No operation here loses data: outputs may not alias an input or each other
//! ([`ensure_distinct_files`]), every file is replaced atomically
//! ([`crate::atomic_write::write_atomically`]), the archive is written before the compacted
//! transcript, and `expand` writes only what restores the original messages exactly.

mod archive_file;
mod compact;
mod compressor;
mod distinct_paths;
mod expand;
mod recall;
mod replay;
mod replay_cost;

pub use archive_file::{ARCHIVE_VERSION, ArchiveHeader, read_archive_file, write_archive_file};
pub use compact::{
    CompactedTranscript, MIN_CONTEXT_WINDOW, check_window, compact_transcript, transcript_policy,
};
pub use compressor::Compressor;
pub use distinct_paths::ensure_distinct_files;
pub use expand::{
    ExpandedTranscript, RestoredMatch, expand_transcript, expand_transcript_file, messages_sha256,
    restore_messages,
};
pub use recall::{
    ArtifactCategory, Artifacts, COMMAND_KEY_CHARS, CategoryRecall, RecallReport, artifact_recall,
    extract_artifacts, extract_strict_artifacts, haystack, strict_artifact_recall,
};
pub use replay::{
    ReplayObserver, ReplayReport, ReplayRow, ReplayedCompaction, SkippedTrigger, replay_transcript,
};
pub use replay_cost::{CALL_SPACING_SECS, CostMeter, ReplayCost};

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
    /// Two paths of one operation name the same file (writing one would destroy the other).
    #[error(
        "{first} {first_path} and {second} {second_path} are the same file; give each its own path"
    )]
    SameFile {
        /// What the first path is for (`the input`, `--out`, …).
        first: String,
        /// The first path as given.
        first_path: PathBuf,
        /// What the second path is for.
        second: String,
        /// The second path as given.
        second_path: PathBuf,
    },
    /// Writing an output failed; the file at `path` is as it was before.
    #[error("writing {path}: {cause}; the file is unchanged")]
    Write {
        /// The output file that was not written.
        path: PathBuf,
        /// The write, fsync or rename error.
        cause: std::io::Error,
    },
    /// Even compacted, the transcript does not fit the window: nothing worth writing.
    #[error(
        "the compacted transcript does not fit the window: it still takes {tokens} tokens of \
         {window} ({reason}); raise the window or lower the number of protected messages"
    )]
    DoesNotFit {
        /// Tokens after compaction.
        tokens: usize,
        /// The window.
        window: usize,
        /// The compaction report's explanation.
        reason: String,
    },
    /// Compaction itself failed.
    #[error(transparent)]
    Compaction(#[from] troupe_compaction::CompactionError),
    /// The compression agent's team could not be started or reached.
    #[error("the compression agent: {0}")]
    Team(String),
    /// The archive does not fit the compacted transcript.
    #[error("cannot expand: {0}; nothing was written")]
    Expand(String),
}

/// The sha256 of `bytes`, as hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
