//! Compacting a transcript file, and expanding it back to the exact original.

use std::path::Path;

use troupe_compaction::{
    Archive, BudgetPolicy, CompactOptions, CompactionReport, Summarizer, TokenCounter, compact,
    expand, ledger_from_transcript,
};
use troupe_runtime::{ChatMessage, Conversation};

use super::archive_file::{ARCHIVE_FORMAT, ArchiveHeader, read_archive_file};
use super::{TranscriptOpError, sha256_hex};
use crate::transcript_file::TranscriptFile;

/// What to compact to.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactRequest {
    /// The context window in tokens.
    pub window: usize,
    /// Target fraction of the window.
    pub target: f64,
    /// Recent user/assistant messages never touched.
    pub protected: usize,
    /// Focus for summaries.
    pub instructions: Option<String>,
}

impl CompactRequest {
    /// The budget policy: the default thresholds with this window, target and protection; the
    /// trigger moves above a target at or over it (the trigger plays no part in a manual run).
    ///
    /// # Errors
    /// [`TranscriptOpError::Options`] when the policy does not validate.
    pub fn policy(&self) -> Result<BudgetPolicy, TranscriptOpError> {
        let mut policy = BudgetPolicy::for_window(self.window);
        policy.target = self.target;
        policy.protected_recent = self.protected;
        if policy.trigger <= policy.target {
            policy.trigger = ((policy.target + 1.0) / 2.0).min(0.99);
        }
        policy.warning = policy.warning.min(policy.trigger);
        policy
            .validate()
            .map_err(|e| TranscriptOpError::Options(e.to_string()))?;
        Ok(policy)
    }
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

/// Compact a transcript. `original_text` is the input file's exact text (for its checksum).
///
/// The file ledger is rebuilt from the transcript's own tool calls. Without a summarizer only
/// truncation and masking run; pass the mechanical summarizer to always reach a reachable target.
///
/// # Errors
/// [`TranscriptOpError`] for bad options or a failed compaction.
pub async fn compact_transcript(
    input: &TranscriptFile,
    original_text: &str,
    request: &CompactRequest,
    counter: &dyn TokenCounter,
    summarizer: Option<&dyn Summarizer>,
) -> Result<CompactedTranscript, TranscriptOpError> {
    let policy = request.policy()?;
    let conversation = Conversation::from_messages(input.messages.iter().cloned());
    let ledger = ledger_from_transcript(conversation.messages());
    let options = CompactOptions {
        instructions: request.instructions.clone(),
        ..CompactOptions::default()
    };
    let compaction = compact(
        &conversation,
        &ledger,
        &policy,
        counter,
        summarizer,
        options,
    )
    .await?;
    let file = TranscriptFile {
        messages: compaction.messages.clone(),
        ..input.clone()
    };
    let text = file.to_text()?;
    let header = ArchiveHeader {
        format: ARCHIVE_FORMAT.to_string(),
        version: 1,
        ids: compaction.messages.iter().map(|m| m.id).collect(),
        compacted_sha256: sha256_hex(text.as_bytes()),
        original_sha256: sha256_hex(original_text.as_bytes()),
    };
    Ok(CompactedTranscript {
        file,
        text,
        header,
        archive: compaction.archive,
        report: compaction.report,
    })
}

/// Restore the original of a compacted transcript from its archive file.
///
/// Returns the restored file's text and whether it is byte-identical to the original (by the
/// checksum the archive recorded).
///
/// # Errors
/// [`TranscriptOpError`] when the files cannot be read or do not belong together.
pub fn expand_transcript(
    compacted: &Path,
    archive_path: &Path,
) -> Result<(String, bool), TranscriptOpError> {
    let text = std::fs::read_to_string(compacted).map_err(|source| {
        crate::transcript_file::TranscriptFileError::Io {
            path: compacted.to_path_buf(),
            source,
        }
    })?;
    let file = TranscriptFile::parse(compacted, &text)?;
    let (header, archive) = read_archive_file(archive_path)?;
    if header.ids.len() != file.messages.len() {
        return Err(TranscriptOpError::Expand(format!(
            "{} has {} messages but the archive describes {}: they do not belong together",
            compacted.display(),
            file.messages.len(),
            header.ids.len()
        )));
    }
    if sha256_hex(text.as_bytes()) != header.compacted_sha256 {
        tracing::warn!(file = %compacted.display(), "the compacted transcript changed since compaction; expanding anyway");
    }
    let messages: Vec<ChatMessage> = file
        .messages
        .iter()
        .zip(&header.ids)
        .map(|(m, id)| ChatMessage {
            id: *id,
            ..m.clone()
        })
        .collect();
    let restored =
        expand(&messages, &archive).map_err(|e| TranscriptOpError::Expand(e.to_string()))?;
    let out = TranscriptFile {
        messages: restored,
        ..file
    }
    .to_text()?;
    let identical = sha256_hex(out.as_bytes()) == header.original_sha256;
    Ok((out, identical))
}
