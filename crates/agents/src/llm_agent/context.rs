//! The agent's context: the conversation its model sees, what stands behind it — the archive
//! of every message compaction replaced, the file ledger of its tool calls, the last
//! compaction's report — and how it is measured against the window: the policy, the context
//! check built from it, the token counter and its per-message cache, the tool definitions'
//! count, and whether the warning for this crossing went out.
//!
//! It outlives requests; a checkpoint copies it ([`LlmAgentState`]) at the cost of what changed.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use troupe_compaction::context_check::ContextCheck;
use troupe_compaction::{Archive, Compaction, ContextPolicy, Splice, SpliceError};
use troupe_protocol::CompactionReport;
use troupe_protocol::{ChatMessage, Conversation, MessageId, MessageKind};
use troupe_protocol::{FileLedger, SharedLedger};
use troupe_tokens::{TokenCache, TokenCounter};

mod fit;
mod stats;

pub use stats::{ContextShare, ContextStats, InFlightCompaction};

use super::LlmAgentState;
use super::request::RequestContext;
use super::tool_tokens::ToolTokens;
use crate::compression::client::AppliedCompaction;
use troupe_session::Restored;

/// The agent's conversation, what stands behind it, and how it is measured.
pub(super) struct Context {
    pub(super) conversation: Conversation,
    /// Every message compaction replaced (shared with checkpoints: cloning is O(1)).
    pub(super) archive: Archive,
    /// The file ledger of the agent's tool calls, shared with its tools.
    pub(super) ledger: SharedLedger,
    /// Which ledger `ledger` holds: a fresh number whenever it is replaced rather than added
    /// to, so a checkpoint's copy knows whether it may just take the new entries.
    pub(super) ledger_epoch: u64,
    pub(super) last_compaction: Option<CompactionReport>,
    pub(super) policy: ContextPolicy,
    /// The thresholds the context is checked against, and how the agent compacts.
    pub(super) check: ContextCheck,
    pub(super) counter: Arc<dyn TokenCounter>,
    pub(super) token_cache: TokenCache,
    /// What the tool definitions cost, counted once per set of tools.
    pub(super) tool_tokens: ToolTokens,
    /// Whether the warning for the current crossing of the warning threshold went out.
    pub(super) warned: bool,
}

/// A number no other ledger of this process had (see [`Context::ledger_epoch`]).
pub(super) fn fresh_ledger_epoch() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Context {
    /// The context of `conversation` with what a checkpoint or a log kept beside it (`state`).
    pub(super) fn new(
        conversation: Conversation,
        state: LlmAgentState,
        policy: ContextPolicy,
        check: ContextCheck,
        counter: Arc<dyn TokenCounter>,
    ) -> Self {
        Context {
            conversation,
            archive: state.archive,
            ledger: SharedLedger::from_ledger(state.ledger),
            ledger_epoch: fresh_ledger_epoch(),
            last_compaction: state.last_compaction,
            policy,
            check,
            counter,
            token_cache: TokenCache::new(),
            tool_tokens: ToolTokens::default(),
            warned: false,
        }
    }

    /// Tokens in the conversation now (cached per shared message: new messages are counted,
    /// the rest cost a pointer comparison each).
    pub(super) fn tokens(&self) -> usize {
        self.token_cache
            .count_shared(self.counter.as_ref(), self.conversation.messages())
            .total
    }

    /// Forget the conversation, its ledger and last report (`/clear`); the archive is kept and
    /// ids keep counting, since it still holds originals under the old ones.
    pub(super) fn clear(&mut self) {
        self.conversation.replace_messages(Vec::new());
        self.ledger.replace(FileLedger::new());
        self.ledger_epoch = fresh_ledger_epoch();
        self.last_compaction = None;
        self.warned = false;
    }

    /// Continue from another session log's conversation and what it kept beside it (`/resume`).
    pub(super) fn resume(&mut self, restored: Restored) {
        self.conversation = restored.conversation;
        self.ledger.replace(restored.ledger);
        self.ledger_epoch = fresh_ledger_epoch();
        self.archive = restored.archive;
        self.last_compaction = restored.last_compaction;
        // Message ids restart with the other log: cached counts under old ids would be wrong.
        self.token_cache = TokenCache::new();
        self.warned = false;
    }

    /// The state a checkpoint keeps beyond the conversation, copied whole.
    pub(super) fn state(&self) -> LlmAgentState {
        LlmAgentState {
            ledger: self.ledger.snapshot(),
            archive: self.archive.clone(),
            last_compaction: self.last_compaction.clone(),
            ledger_epoch: self.ledger_epoch,
            before_in_flight: None,
        }
    }

    /// Bring a checkpoint's `state` up to date: O(what changed) — the new ledger entries; the
    /// archive is shared.
    pub(super) fn update_state(&self, state: &mut LlmAgentState) {
        let copied = state.ledger.entries().len();
        if state.ledger_epoch == self.ledger_epoch && copied <= self.ledger.len() {
            for entry in self.ledger.entries_from(copied) {
                state.ledger.record(entry);
            }
        } else {
            state.ledger = self.ledger.snapshot();
            state.ledger_epoch = self.ledger_epoch;
        }
        state.archive = self.archive.clone();
        state.last_compaction.clone_from(&self.last_compaction);
    }

    /// Put a compaction's result in place of the conversation it was made from (nothing
    /// changes when it changed nothing) and report it with the summary it wrote.
    pub(super) fn apply(
        &mut self,
        compaction: Compaction,
        req: &mut RequestContext,
    ) -> AppliedCompaction {
        let before: HashSet<MessageId> =
            self.conversation.messages().iter().map(|m| m.id).collect();
        if compaction.changed() {
            req.keep_for_rollback(&self.conversation);
            compaction.apply_to(&mut self.conversation);
            self.archive.extend(&compaction.archive);
        }
        let summary = self
            .conversation
            .messages()
            .iter()
            .rev()
            .find(|m| m.kind == MessageKind::Summary && !before.contains(&m.id))
            .map(|m| m.text());
        self.last_compaction = Some(compaction.report.clone());
        self.warned = false;
        AppliedCompaction {
            report: compaction.report,
            summary,
        }
    }

    /// Splice in `compaction`, made of `snapshot` (a prefix of the conversation when it
    /// started): the compacted prefix replaces the snapshot's messages, what was appended since
    /// stays, the invariants are checked on the result. On an error nothing changed.
    pub(super) fn splice(
        &mut self,
        snapshot: &[Arc<ChatMessage>],
        compaction: Compaction,
        req: &mut RequestContext,
    ) -> Result<(), SpliceError> {
        let spliced = Splice {
            now: self.conversation.messages(),
            snapshot,
            compaction: &compaction,
        }
        .apply(&self.policy, self.counter.as_ref(), &self.token_cache)?;
        req.keep_for_rollback(&self.conversation);
        self.conversation.replace_shared(spliced);
        self.archive.extend(&compaction.archive);
        self.last_compaction = Some(compaction.report);
        self.warned = false;
        Ok(())
    }
}
