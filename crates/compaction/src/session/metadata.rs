//! `get_compression_metadata`: what the compression agent sees before it decides.

use serde::{Deserialize, Serialize};
use troupe_protocol::{MessageId, MessageKind, Role};

use super::{CompactionSession, is_masked, text_starts_with};
use crate::pairing::{owners, tool_name};
use crate::protection::IdRange;

/// Characters of each message shown as a preview.
const PREVIEW_CHARS: usize = 120;

/// One message as the compression agent sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageMetadata {
    /// The id to pass to the tools.
    pub id: MessageId,
    /// Who wrote it.
    pub role: Role,
    /// Normal, summary, compressed stub or display-only.
    pub kind: MessageKind,
    /// Its tokens.
    pub tokens: usize,
    /// Whether it must not be touched.
    pub protected: bool,
    /// Whether it already is a stub, truncated output or summary.
    pub compressed: bool,
    /// For a tool result: the tool that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// For an assistant message: the tools it calls.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<String>,
    /// The start of its text, whitespace collapsed.
    pub preview: String,
}

/// The file ledger in brief.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerSummary {
    /// Recorded operations.
    pub entries: usize,
    /// Files read and never modified.
    pub read_only_files: Vec<String>,
    /// Files written or edited.
    pub modified_files: Vec<String>,
}

/// Everything the compression agent needs to plan (the `get_compression_metadata` tool).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompressionMetadata {
    /// Tokens now.
    pub total_tokens: usize,
    /// The target.
    pub target_tokens: usize,
    /// Tokens still to free (0 when reached).
    pub tokens_to_free: usize,
    /// Whether the target is met.
    pub reached: bool,
    /// The context window.
    pub context_window: usize,
    /// Tool outputs above this many tokens can be truncated.
    pub tool_output_limit_tokens: usize,
    /// Every message, in order.
    pub messages: Vec<MessageMetadata>,
    /// Runs of protected messages.
    pub protected_ranges: Vec<IdRange>,
    /// The file ledger in brief.
    pub ledger: LedgerSummary,
    /// The summary message from an earlier compaction, if there is one.
    pub previous_summary: Option<MessageId>,
    /// Tokens the tiers could still free.
    pub freeable_tokens: usize,
}

impl CompactionSession<'_> {
    /// The state of the working conversation (the `get_compression_metadata` tool).
    pub fn metadata(&self) -> CompressionMetadata {
        let owners = owners(&self.messages);
        let messages = self
            .messages
            .iter()
            .zip(&self.tokens)
            .enumerate()
            .map(|(i, (m, &tokens))| MessageMetadata {
                id: m.id,
                role: m.role,
                kind: m.kind,
                tokens,
                protected: self.protected.contains(m.id),
                compressed: m.kind != MessageKind::Normal
                    || is_masked(m)
                    || text_starts_with(m, "<summary>"),
                tool_name: tool_name(&self.messages, owners[i], i).map(str::to_string),
                calls: m.calls().iter().map(|c| c.function.name.clone()).collect(),
                preview: preview(&m.text()),
            })
            .collect();
        let status = self.verify_target();
        CompressionMetadata {
            total_tokens: status.current,
            target_tokens: status.target,
            tokens_to_free: status.current.saturating_sub(status.target),
            reached: status.reached,
            context_window: self.policy.context_window,
            tool_output_limit_tokens: self.policy.tool_output_limit_tokens,
            messages,
            protected_ranges: self.protected.ranges(&self.messages),
            ledger: LedgerSummary {
                entries: self.ledger.entries().len(),
                read_only_files: self.ledger.read_only_files().into_iter().collect(),
                modified_files: self.ledger.modified_files().into_iter().collect(),
            },
            previous_summary: self
                .messages
                .iter()
                .find(|m| m.role != Role::Tool && text_starts_with(m, "<summary>"))
                .map(|m| m.id),
            freeable_tokens: self.freeable_tokens(),
        }
    }
}

fn preview(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= PREVIEW_CHARS {
        collapsed
    } else {
        format!(
            "{}…",
            collapsed.chars().take(PREVIEW_CHARS).collect::<String>()
        )
    }
}
