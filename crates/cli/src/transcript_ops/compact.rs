//! Compacting a transcript file, and expanding it back to the exact original.

use std::path::Path;

use troupe_agents::compression::CompactionRequest;
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{Archive, ContextPolicy};
use troupe_protocol::Conversation;
use troupe_protocol::{CompactTrigger, CompactionReport};

use super::archive_file::{ARCHIVE_FORMAT, ARCHIVE_VERSION, ArchiveHeader, write_archive_file};
use super::compressor::Compressor;
use super::distinct_paths::ensure_distinct_files;
use super::expand::messages_sha256;
use super::{TranscriptOpError, sha256_hex};
use crate::atomic_write::write_atomically;
use crate::transcript_file::TranscriptFile;

/// The name a transcript's conversation has in the compression agent's reports and events.
pub(super) const TRANSCRIPT_AGENT: &str = "transcript";

/// The smallest context window `troupe compact` and `troupe replay` work with, in tokens.
///
/// A window must hold the system prompt, the protected recent messages and a summary; below
/// about 1k tokens even a short conversation cannot, and the result would be useless.
pub const MIN_CONTEXT_WINDOW: usize = 1024;

/// Check that `window` is at least [`MIN_CONTEXT_WINDOW`].
///
/// # Errors
/// [`TranscriptOpError::Options`] saying why a smaller window is unusable.
pub fn check_window(window: usize) -> Result<(), TranscriptOpError> {
    if window < MIN_CONTEXT_WINDOW {
        return Err(TranscriptOpError::Options(format!(
            "window ({window} tokens) is too small: a context window must hold the system \
             prompt, the protected recent messages and a summary, so troupe needs at least \
             {MIN_CONTEXT_WINDOW} tokens"
        )));
    }
    Ok(())
}

/// The context policy `troupe compact` (and the MCP `compact_transcript` tool) compacts a
/// transcript to: the defaults of a `window`-token window with this `target` and `protected`
/// recent user/assistant messages.
///
/// A one-shot compaction never triggers, so only `0 < target < 1` is asked of the target;
/// the trigger and warning move above a target at or over them, only to keep the policy
/// consistent.
///
/// # Errors
/// [`TranscriptOpError::Options`] naming the value the caller passed: a window below
/// [`MIN_CONTEXT_WINDOW`], a target that is not a fraction strictly between 0 and 1.
pub fn transcript_policy(
    window: usize,
    target: f64,
    protected: usize,
) -> Result<ContextPolicy, TranscriptOpError> {
    check_window(window)?;
    if !(target.is_finite() && target > 0.0 && target < 1.0) {
        return Err(TranscriptOpError::Options(format!(
            "target ({target}) must be a share of the window strictly between 0 and 1, \
             e.g. 0.4 for 40 %"
        )));
    }
    let mut policy = ContextPolicy::for_window(window);
    policy.target = target;
    policy.protected_recent = protected;
    if policy.trigger <= target {
        // Halfway to 1 is above the target and below 1 for every target below 1 but the
        // very last float before it, which no one means.
        policy.trigger = (target + 1.0) / 2.0;
    }
    policy.warning = policy.warning.min(policy.trigger);
    policy
        .validate()
        .map_err(|e| TranscriptOpError::Options(e.to_string()))?;
    Ok(policy)
}

/// A compacted transcript with its archive, ready to write.
#[derive(Debug, Clone)]
pub struct CompactedTranscript {
    /// The compacted transcript, in the input's layout.
    pub file: TranscriptFile,
    /// Its text.
    pub text: String,
    /// The archive header (ids, checksums).
    pub header: ArchiveHeader,
    /// The archived originals.
    pub archive: Archive,
    /// What compaction did.
    pub report: CompactionReport,
}

impl CompactedTranscript {
    /// Write the archive to `archive`, then the compacted transcript to `out`, each atomically.
    ///
    /// The archive goes first so that a compacted transcript never exists without the archive
    /// that restores it; `input`, `out` and `archive` must be three different files, so the
    /// originals are never overwritten.
    ///
    /// # Errors
    /// [`TranscriptOpError::SameFile`] before anything is written;
    /// [`TranscriptOpError::Archive`] or [`TranscriptOpError::Write`] when a write fails (the
    /// file it was writing is unchanged; a failed `out` leaves the new archive in place).
    pub fn write_files(
        &self,
        input: &Path,
        out: &Path,
        archive: &Path,
    ) -> Result<(), TranscriptOpError> {
        ensure_distinct_files(&[("the input", input), ("--out", out), ("--archive", archive)])?;
        write_archive_file(archive, &self.header, &self.archive)?;
        write_atomically(out, self.text.as_bytes()).map_err(|source| TranscriptOpError::Write {
            path: out.to_path_buf(),
            cause: source,
        })
    }
}

/// Compact a transcript through `compressor`'s compression agent, as a manual compaction to
/// `policy` ([`transcript_policy`]) keeping `focus` in view. `original_text` is the input
/// file's exact text (for its checksum).
///
/// The file ledger is rebuilt from the transcript's own tool calls. Nothing is written: see
/// [`CompactedTranscript::write_files`].
///
/// # Errors
/// [`TranscriptOpError`] for a failed compaction, and [`TranscriptOpError::DoesNotFit`] when
/// even the compacted transcript exceeds the window (the protected messages alone are too big
/// for it).
pub async fn compact_transcript(
    input: &TranscriptFile,
    original_text: &str,
    policy: &ContextPolicy,
    focus: Option<String>,
    compressor: &Compressor,
) -> Result<CompactedTranscript, TranscriptOpError> {
    let conversation = Conversation::from_messages(input.messages.iter().cloned());
    let ledger = ledger_from_transcript(conversation.messages());
    let compaction = compressor
        .compact(CompactionRequest {
            focus,
            ..CompactionRequest::new(
                TRANSCRIPT_AGENT,
                conversation,
                ledger,
                policy.clone(),
                CompactTrigger::Manual,
            )
        })
        .await?;
    if compaction.report.tokens_after > policy.context_window {
        return Err(TranscriptOpError::DoesNotFit {
            tokens: compaction.report.tokens_after,
            window: policy.context_window,
            reason: compaction.report.reason.clone(),
        });
    }
    let file = TranscriptFile {
        messages: compaction.messages.clone(),
        ..input.clone()
    };
    let text = file.to_text()?;
    let header = ArchiveHeader {
        format: ARCHIVE_FORMAT.to_string(),
        version: ARCHIVE_VERSION,
        ids: compaction.messages.iter().map(|m| m.id).collect(),
        compacted_sha256: sha256_hex(text.as_bytes()),
        original_sha256: sha256_hex(original_text.as_bytes()),
        // Of the messages as read back from the text, which is what `expand` will see.
        compacted_messages_sha256: Some(messages_sha256(
            &TranscriptFile::parse(Path::new("the compacted transcript"), &text)?.messages,
        )?),
        original_messages_sha256: Some(messages_sha256(&input.messages)?),
    };
    Ok(CompactedTranscript {
        file,
        text,
        header,
        archive: compaction.archive,
        report: compaction.report,
    })
}
