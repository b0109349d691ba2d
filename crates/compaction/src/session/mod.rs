//! A compaction in progress: the working conversation and the validated operations on it.
//!
//! The compression agent's four tools map onto [`CompactionSession::metadata`],
//! [`CompactionSession::compress_tool_result`], [`CompactionSession::compress_segment`] and
//! [`CompactionSession::verify_target`]; the deterministic planner
//! ([`CompactionSession::finish_deterministically`]) uses the same operations, and
//! [`CompactionSession::finish`] validates the result before handing it out. Every operation
//! either applies completely or refuses with a [`Refusal`] and changes nothing.

mod inline;
mod metadata;
mod names;
mod planner;
mod preview;
mod reason;
mod segment;
mod tool_results;

use std::collections::HashSet;
use std::ops::RangeInclusive;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use troupe_protocol::FileLedger;
use troupe_protocol::RaisedAim;
use troupe_protocol::{
    ChatMessage, Content, ContentSlot, Conversation, MessageId, MessageKind, Role,
};

pub use metadata::{CompressionMetadata, LedgerSummary, MessageMetadata};
pub use planner::{PlannedStep, PlannerOutcome};
pub use preview::{CompactionPreview, MessageFate, PlannedMessage, preview};
// Its operations refuse with this; defined beside `CompactionError` (both are the crate's errors).
pub use crate::error::Refusal;
pub(crate) use planner::{SUMMARY_BUDGET_FLOOR, SUMMARY_FRAME_ESTIMATE};

use crate::archive::Archive;
use crate::compact::{CompactOptions, Compaction};
use crate::error::CompactionError;
use crate::markers::parse_replaces;
use crate::mask::{STUB_PREFIX, is_stub};
use crate::pairing::{check_pairing, owners};
use crate::policy::ContextPolicy;
use crate::protection::ProtectedSet;
use crate::validate::{InvariantViolation, ValidationContext, check_invariants};
use troupe_protocol::id_hash::{IdMap, IdSet};
use troupe_protocol::{CompactionReport, DroppedArtifact, SummarizerUsage, TierCounts};
use troupe_tokens::TokenCache;
use troupe_tokens::TokenCounter;

/// How `compress_tool_result` shrinks a tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolResultStrategy {
    /// Tier 1: keep head and tail, state what was cut.
    Truncate,
    /// Tier 2: replace by a metadata stub from the file ledger.
    Mask,
}

/// What one successful operation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepOutcome {
    /// The messages taken out (now in the archive).
    pub replaced: Vec<MessageId>,
    /// The message put in their place (`None` for a removal).
    pub new_id: Option<MessageId>,
    /// Tokens of the replaced messages.
    pub tokens_before: usize,
    /// Tokens of the replacement.
    pub tokens_after: usize,
    /// The conversation's total after the operation.
    pub total_tokens: usize,
    /// Whether the target is now met.
    pub reached: bool,
}

/// Where the working conversation stands against the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetStatus {
    /// Tokens now.
    pub current: usize,
    /// The target this session works toward: the policy's target, or the raised aim when the
    /// messages it cannot take out leave a summary too little room under that target (see
    /// [`ContextPolicy::aim_tokens`]; the report's `raised_aim` says so).
    pub target: usize,
    /// `current <= target`.
    pub reached: bool,
}

/// A compaction in progress over one conversation.
pub struct CompactionSession<'a> {
    before: Vec<ChatMessage>,
    /// Where each message of `before` is.
    before_index: IdMap<MessageId, usize>,
    tokens_before: usize,
    messages: Vec<ChatMessage>,
    tokens: Vec<usize>,
    total: usize,
    ledger: &'a FileLedger,
    policy: ContextPolicy,
    counter: &'a dyn TokenCounter,
    cache: TokenCache,
    archive: Archive,
    protected: ProtectedSet,
    /// Tokens no operation can take out: protected messages, and their results as stubs.
    fixed_tokens: usize,
    /// What the session works toward: [`ContextPolicy::aim_tokens`] of `fixed_tokens`.
    aim: usize,
    next_id: u64,
    request: CompactOptions,
    /// For messages created in this session: the ids of the input messages they stand for.
    roots: IdMap<MessageId, Vec<MessageId>>,
    /// For messages created in this session: the messages of `before` they replace, however
    /// many replacements deep (`roots` goes on to an earlier compaction's originals, which
    /// `before` does not hold).
    sources: IdMap<MessageId, Vec<MessageId>>,
    /// Artifacts a replacement hid without naming them, for want of room (see
    /// `artifacts/hidden.rs`).
    dropped: Vec<DroppedArtifact>,
    counts: TierCounts,
    usage: SummarizerUsage,
    fallbacks: Vec<String>,
    started: Instant,
    /// Planner memory: (message, strategy) pairs that were refused, not to be retried.
    no_gain: IdSet<(MessageId, ToolResultStrategy)>,
    /// Planner memory: segments that were refused.
    failed_segments: IdSet<(MessageId, MessageId)>,
    summaries_failed: bool,
    per_message_done: bool,
    /// The last segment frame the planner built (`segment::FrameMemo`): the summary it plans
    /// is then wrapped in it, not built a second time.
    frame_memo: segment::FrameMemo,
}

impl<'a> CompactionSession<'a> {
    /// Start compacting `conversation`. Fails if the policy is invalid or the conversation
    /// already breaks the tool-pairing rule.
    pub fn new(
        conversation: &Conversation,
        ledger: &'a FileLedger,
        policy: &ContextPolicy,
        counter: &'a dyn TokenCounter,
        request: CompactOptions,
    ) -> Result<Self, CompactionError> {
        policy.validate()?;
        let messages = conversation.to_messages();
        check_pairing(&messages).map_err(CompactionError::InvalidInput)?;
        let mut seen = HashSet::with_capacity(messages.len());
        if let Some(dup) = messages.iter().find(|m| !seen.insert(m.id)) {
            return Err(CompactionError::InvalidInput(
                InvariantViolation::DuplicateId { id: dup.id },
            ));
        }
        let cache = request.token_cache.clone().unwrap_or_default();
        let counted = cache.count_messages(counter, &messages);
        let protected = ProtectedSet::compute(&messages, policy.protected_recent);
        let before_index = messages
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id, i))
            .collect();
        let mut session = CompactionSession {
            before: messages.clone(),
            before_index,
            tokens_before: counted.total,
            messages,
            tokens: counted.per_message,
            total: counted.total,
            ledger,
            policy: policy.clone(),
            counter,
            cache,
            archive: Archive::new(),
            protected,
            fixed_tokens: 0,
            aim: 0,
            next_id: conversation.next_id().0,
            request,
            roots: IdMap::default(),
            sources: IdMap::default(),
            dropped: Vec::new(),
            counts: TierCounts::default(),
            usage: SummarizerUsage::default(),
            fallbacks: Vec::new(),
            started: Instant::now(),
            no_gain: IdSet::default(),
            failed_segments: IdSet::default(),
            summaries_failed: false,
            per_message_done: false,
            frame_memo: segment::FrameMemo::default(),
        };
        session.fixed_tokens = session.irreducible_tokens();
        session.aim = policy.aim_tokens(session.fixed_tokens);
        Ok(session)
    }

    /// Tokens no operation can take out: the protected messages, and the results of their tool
    /// calls at the size of their mask stubs (a summary must keep a call with its results, but
    /// tier 2 may still mask them).
    fn irreducible_tokens(&self) -> usize {
        let owners = owners(&self.messages);
        (0..self.messages.len())
            .filter(|&i| !summarizable(&self.messages, &owners, &self.protected, i))
            .map(|i| {
                if self.protected.contains(self.messages[i].id) {
                    self.tokens[i]
                } else {
                    self.masked_tokens(i)
                }
            })
            .sum()
    }

    /// The working conversation as it stands.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// The archive so far.
    pub fn archive(&self) -> &Archive {
        &self.archive
    }

    /// The protected messages.
    pub fn protected(&self) -> &ProtectedSet {
        &self.protected
    }

    /// The policy in force.
    pub fn policy(&self) -> &ContextPolicy {
        &self.policy
    }

    /// Tokens now, the target this session works toward (the policy's, or the raised aim when
    /// that target would squeeze the summary: see [`TargetStatus::target`]), and whether it is
    /// met.
    pub fn verify_target(&self) -> TargetStatus {
        TargetStatus {
            current: self.total,
            target: self.aim,
            reached: self.total <= self.aim,
        }
    }

    /// What the session aims for instead of the policy's target, when it does.
    pub(crate) fn raised_aim(&self) -> Option<RaisedAim> {
        (self.aim > self.policy.target_tokens()).then(|| RaisedAim {
            fixed_tokens: self.fixed_tokens,
            room_tokens: self.policy.summary_room_tokens(),
            ceiling_tokens: self.policy.raised_aim_ceiling_tokens(),
            aim_tokens: self.aim,
        })
    }

    /// Tokens the tiers could still free (an estimate; the anti-thrash guard's measure):
    /// uncompressed tool results beyond a stub's size, display-only messages, and unprotected
    /// user/assistant/system messages other than summaries.
    pub fn freeable_tokens(&self) -> usize {
        const STUB_ESTIMATE: usize = 24;
        self.messages
            .iter()
            .zip(&self.tokens)
            .filter(|(m, _)| !self.protected.contains(m.id))
            .map(|(m, &tokens)| match (m.role, m.kind) {
                (_, MessageKind::DisplayOnly) => tokens,
                (_, MessageKind::Summary) => 0,
                (Role::Tool, _) if text_starts_with(m, STUB_PREFIX) => 0,
                (Role::Tool, _) => tokens.saturating_sub(STUB_ESTIMATE),
                _ => tokens,
            })
            .sum()
    }

    fn index_of(&self, id: MessageId) -> Result<usize, Refusal> {
        self.messages
            .iter()
            .position(|m| m.id == id)
            .ok_or(Refusal::UnknownMessage(id))
    }

    fn refuse_protected(&self, id: MessageId) -> Result<(), Refusal> {
        match self.protected.reason(id) {
            Some(reason) => Err(Refusal::Protected { id, reason }),
            None => Ok(()),
        }
    }

    /// Mutations are refused outright when the input was already under target.
    fn refuse_if_under_target(&self) -> Result<(), Refusal> {
        let target = self.policy.target_tokens();
        if self.tokens_before <= target {
            return Err(Refusal::NoCompactionNeeded {
                current: self.tokens_before,
                target,
            });
        }
        Ok(())
    }

    fn allocate_id(&mut self) -> MessageId {
        let id = MessageId(self.next_id.max(1));
        self.next_id = id.0 + 1;
        id
    }

    fn count(&self, message: &ChatMessage) -> usize {
        self.cache.count_message(self.counter, message)
    }

    /// The input-conversation ids a message stands for (itself, unless it is a replacement).
    fn root_ids(&self, message: &ChatMessage) -> Vec<MessageId> {
        if let Some(roots) = self.roots.get(&message.id) {
            return roots.clone();
        }
        // A stub or summary from an earlier compaction names its own originals.
        let earlier_replacement = message.kind != MessageKind::Normal
            || text_starts_with(message, STUB_PREFIX)
            || text_starts_with(message, "<summary>");
        if earlier_replacement
            && let Some(ids) = parse_replaces(&message.text()).filter(|ids| !ids.is_empty())
        {
            return ids;
        }
        vec![message.id]
    }

    /// The sorted root ids of `messages[range]`, for a `[replaces …]` line.
    fn roots_of(&self, range: RangeInclusive<usize>) -> Vec<MessageId> {
        let mut ids: Vec<MessageId> = self.messages[range]
            .iter()
            .flat_map(|m| self.root_ids(m))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Replace `messages[range]` by `replacement` (which already carries a fresh id and was
    /// counted as `tokens`), archiving the originals.
    fn commit_replacement(
        &mut self,
        range: RangeInclusive<usize>,
        replacement: ChatMessage,
        tokens: usize,
        roots: Vec<MessageId>,
    ) -> StepOutcome {
        let replaced_tokens: usize = self.tokens[range.clone()].iter().sum();
        let new_id = replacement.id;
        let replaced: Vec<MessageId> = self.messages[range.clone()].iter().map(|m| m.id).collect();
        let sources = self.sources_of(&replaced);
        self.sources.insert(new_id, sources);
        self.roots.insert(new_id, roots);
        // The originals move into the archive: a long output is not copied.
        let originals: Vec<ChatMessage> =
            self.messages.splice(range.clone(), [replacement]).collect();
        self.archive.record_replacement(new_id, originals);
        self.tokens.splice(range, [tokens]);
        self.total = self.total - replaced_tokens + tokens;
        self.outcome(replaced, Some(new_id), replaced_tokens, tokens)
    }

    /// Remove `messages[index]`, archiving it with the message it followed.
    fn commit_removal(&mut self, index: usize) -> StepOutcome {
        let after = index.checked_sub(1).map(|i| self.messages[i].id);
        let removed = self.messages.remove(index);
        let tokens = self.tokens.remove(index);
        let removed_id = removed.id;
        self.archive.record_removal(removed, after);
        self.total -= tokens;
        self.outcome(vec![removed_id], None, tokens, 0)
    }

    fn outcome(
        &self,
        replaced: Vec<MessageId>,
        new_id: Option<MessageId>,
        tokens_before: usize,
        tokens_after: usize,
    ) -> StepOutcome {
        let status = self.verify_target();
        StepOutcome {
            replaced,
            new_id,
            tokens_before,
            tokens_after,
            total_tokens: status.current,
            reached: status.reached,
        }
    }

    /// Validate the working conversation against the input and hand out the result.
    ///
    /// A violated invariant is an error: the broken result is discarded, never returned.
    pub fn finish(self) -> Result<Compaction, CompactionError> {
        let reason = self.reason();
        self.finish_with_reason(reason)
    }

    /// Finish without compacting, because something said no (the anti-thrash guard, the
    /// minimum-gain rule, an agent's before-compaction hook): the conversation is returned
    /// unchanged, the report `skipped`, its reason `compaction skipped: {why}`.
    pub fn finish_skipped(mut self, why: String) -> Result<Compaction, CompactionError> {
        self.messages = self.before.clone();
        self.dropped.clear();
        let mut compaction = self.finish_with_reason(format!("compaction skipped: {why}"))?;
        compaction.report.skipped = true;
        Ok(compaction)
    }

    fn finish_with_reason(self, reason: String) -> Result<Compaction, CompactionError> {
        let target = self.policy.target_tokens();
        let context = ValidationContext {
            protected: &self.protected,
            archive: &self.archive,
            tokens_before: self.tokens_before,
            tokens_after: self.total,
            target_tokens: target,
        };
        check_invariants(&self.before, &self.messages, &context)
            .map_err(CompactionError::Invariant)?;
        let freeable_tokens_after = self.freeable_tokens();
        let no_compaction_needed = self.tokens_before <= target;
        let raised_aim = self.raised_aim();
        let report = CompactionReport {
            tokens_before: self.tokens_before,
            tokens_after: self.total,
            target_tokens: target,
            context_window: self.policy.context_window,
            ratio: if self.tokens_before == 0 {
                1.0
            } else {
                self.total as f64 / self.tokens_before as f64
            },
            tiers: self.counts,
            protected: self.protected.len(),
            summarizer: self.usage,
            duration_ms: self.started.elapsed().as_secs_f64() * 1000.0,
            reached: self.total <= target,
            reason,
            no_compaction_needed,
            skipped: false,
            fallbacks: self.fallbacks,
            archived: self.archive.len(),
            freeable_tokens_after,
            raised_aim,
            receipt: None,
            hook_notes: Vec::new(),
            dropped_for_room: self.dropped,
        };
        Ok(Compaction {
            messages: self.messages,
            archive: self.archive,
            report,
        })
    }
}

/// Whether an operation may replace `messages[i]`: it is not protected, nor the result of a
/// protected call (a summary must keep a call with all of its results).
pub(crate) fn summarizable(
    messages: &[ChatMessage],
    owners: &[Option<usize>],
    protected: &ProtectedSet,
    i: usize,
) -> bool {
    !protected.contains(messages[i].id)
        && owners[i].is_none_or(|o| !protected.contains(messages[o].id))
}

/// Whether a message's text starts with `prefix`, without copying the text.
pub(crate) fn text_starts_with(message: &ChatMessage, prefix: &str) -> bool {
    match &message.content {
        ContentSlot::Value(Content::Text(text)) => text.starts_with(prefix),
        ContentSlot::Value(content @ Content::Parts(_)) => content.text().starts_with(prefix),
        ContentSlot::Absent | ContentSlot::Null => false,
    }
}

/// Whether a tool result is already masked.
pub(crate) fn is_masked(message: &ChatMessage) -> bool {
    match &message.content {
        ContentSlot::Value(Content::Text(text)) => is_stub(text),
        _ => text_starts_with(message, STUB_PREFIX),
    }
}
