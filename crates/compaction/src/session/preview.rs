//! What a compaction is about to do, for whoever must decide before it runs (an agent's
//! before-compaction hook): every message with what the deterministic planner would make of
//! it — kept, protected, truncated, masked, removed, shortened or summarized — and the artifact
//! ledger of what would go.
//!
//! The preview is a dry run of [`compact`](crate::compact) with the mechanical summarizer and
//! no steering: the compaction that follows may do less (a compression agent's model steers
//! first, a better summary fits more), never touch a message the preview keeps.

use serde::{Deserialize, Serialize};
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, Conversation, MessageId, MessageKind, Role};

use super::is_masked;
use crate::archive::Archive;
use crate::artifacts::ArtifactLedger;
use crate::compact::{CompactOptions, Compaction, compact};
use crate::error::CompactionError;
use crate::pairing::owners;
use crate::policy::ContextPolicy;
use crate::protection::{ProtectedSet, ProtectionReason};
use crate::summary::MechanicalSummarizer;
use troupe_protocol::CompactTrigger;
use troupe_protocol::id_hash::{IdMap, IdSet};
use troupe_tokens::TokenCounter;

/// What the compaction would make of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fate", content = "why", rename_all = "snake_case")]
pub enum MessageFate {
    /// Left as it is, though it could have been compressed.
    Kept,
    /// Never touched, and why (pinned messages are protected).
    Protected(ProtectionReason),
    /// Tier 1: its head and tail kept.
    Truncated,
    /// Tier 2: replaced by a metadata stub.
    Masked,
    /// Tier 2: a display-only message dropped.
    Removed,
    /// Tier 3, per-message mode: shortened on its own.
    Shortened,
    /// Tier 3: folded into a summary.
    Summarized,
}

impl MessageFate {
    /// Whether the message's text would not reach the model as it is.
    pub fn is_compressed(self) -> bool {
        !matches!(self, MessageFate::Kept | MessageFate::Protected(_))
    }
}

/// One message in a [`CompactionPreview`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedMessage {
    /// The message's id (the one to pin).
    pub id: MessageId,
    /// Who wrote it.
    pub role: Role,
    /// Its tokens.
    pub tokens: usize,
    /// What the compaction would make of it.
    pub fate: MessageFate,
}

/// What a compaction of a conversation would do (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionPreview {
    /// What asks for the compaction.
    pub trigger: CompactTrigger,
    /// Tokens now.
    pub tokens_before: usize,
    /// Tokens after the planner's compaction.
    pub tokens_after: usize,
    /// The target.
    pub target_tokens: usize,
    /// The planner's report in words ("target reached: …", "compaction skipped: …").
    pub reason: String,
    /// Whether nothing would be tried (under target, or an automatic trigger held back).
    pub skipped: bool,
    /// Every message, in order, with its fate.
    pub messages: Vec<PlannedMessage>,
    /// The artifacts (commands, errors, tests, symbols, names) of the messages that would be
    /// compressed: what a summary's artifact blocks must carry for nothing to be lost.
    pub artifacts: ArtifactLedger,
}

impl CompactionPreview {
    /// The ids of the messages with fate `fate`.
    pub fn ids_with(&self, fate: MessageFate) -> Vec<MessageId> {
        self.messages
            .iter()
            .filter(|m| m.fate == fate)
            .map(|m| m.id)
            .collect()
    }
}

/// Preview the compaction of `conversation` (see the module docs).
///
/// # Errors
/// [`CompactionError`] when the compaction itself would fail: an invalid policy or input.
pub async fn preview(
    conversation: &Conversation,
    ledger: &FileLedger,
    policy: &ContextPolicy,
    counter: &dyn TokenCounter,
    request: CompactOptions,
) -> Result<CompactionPreview, CompactionError> {
    let trigger = request.trigger;
    let cache = request.token_cache.clone().unwrap_or_default();
    let mechanical = MechanicalSummarizer::new();
    let compaction = compact(
        conversation,
        ledger,
        policy,
        counter,
        Some(&mechanical),
        request,
    )
    .await?;
    let before = conversation.to_messages();
    let tokens = cache.count_messages(counter, &before).per_message;
    let fates = fates(&before, &compaction, policy.protected_recent);
    let artifacts = lost_artifacts(&before, &fates);
    let messages = before
        .iter()
        .zip(tokens)
        .zip(fates)
        .map(|((m, tokens), fate)| PlannedMessage {
            id: m.id,
            role: m.role,
            tokens,
            fate,
        })
        .collect();
    let report = compaction.report;
    Ok(CompactionPreview {
        trigger,
        tokens_before: report.tokens_before,
        tokens_after: report.tokens_after,
        target_tokens: report.target_tokens,
        reason: report.reason,
        skipped: report.skipped || report.no_compaction_needed,
        messages,
        artifacts,
    })
}

/// The fate of each of `before`'s messages in `compaction`.
fn fates(before: &[ChatMessage], compaction: &Compaction, recent: usize) -> Vec<MessageFate> {
    let protected = ProtectedSet::compute(before, recent);
    let kept: IdSet<MessageId> = compaction.messages.iter().map(|m| m.id).collect();
    let by_id: IdMap<MessageId, &ChatMessage> =
        compaction.messages.iter().map(|m| (m.id, m)).collect();
    let replaced_by = replacements(&compaction.archive);
    before
        .iter()
        .map(|m| {
            if let Some(reason) = protected.reason(m.id) {
                return MessageFate::Protected(reason);
            }
            if kept.contains(&m.id) {
                return MessageFate::Kept;
            }
            // Follow the replacements to the message that stands for it in the result (a
            // truncated output may be summarized later in the same compaction).
            let mut id = m.id;
            let mut steps = 0;
            loop {
                match replaced_by.get(&id) {
                    Some(Some(next)) if steps < compaction.archive.len() => {
                        id = *next;
                        steps += 1;
                        if let Some(replacement) = by_id.get(&id) {
                            return fate_of(replacement);
                        }
                    }
                    _ => return MessageFate::Removed,
                }
            }
        })
        .collect()
}

/// Original id → what replaced it (`None`: removed).
fn replacements(archive: &Archive) -> IdMap<MessageId, Option<MessageId>> {
    archive
        .entries()
        .iter()
        .map(|e| (e.original.id, e.replaced_by))
        .collect()
}

fn fate_of(replacement: &ChatMessage) -> MessageFate {
    match (replacement.kind, replacement.role) {
        (MessageKind::Summary, _) => MessageFate::Summarized,
        (MessageKind::CompressedStub, _) => MessageFate::Masked,
        (_, Role::Tool) if is_masked(replacement) => MessageFate::Masked,
        (_, Role::Tool) => MessageFate::Truncated,
        _ => MessageFate::Shortened,
    }
}

/// The artifact ledger of the compressed messages, with the calls of compressed results (a
/// command's name is in the call, its outcome in the result).
fn lost_artifacts(before: &[ChatMessage], fates: &[MessageFate]) -> ArtifactLedger {
    let owners = owners(before);
    let mut take = vec![false; before.len()];
    for (i, fate) in fates.iter().enumerate() {
        if fate.is_compressed() {
            take[i] = true;
            if let Some(call) = owners[i] {
                take[call] = true;
            }
        }
    }
    ArtifactLedger::from_messages(
        before
            .iter()
            .zip(take)
            .filter(|(_, take)| *take)
            .map(|(m, _)| m),
    )
}
