//! What an agent sends the compression agent, and what comes back.

use std::sync::Arc;

use troupe_compaction::{BudgetPolicy, CompactTrigger, Compaction, CompactionError, TokenCache};
use troupe_runtime::{ChatMessage, ChatModel, Conversation, Job};
use troupe_tools::FileLedger;

/// A request to compact one agent's conversation.
#[derive(Clone)]
pub struct CompactionJob {
    /// Whose conversation it is (compactions of one agent never overlap).
    pub agent: String,
    /// The conversation as it stands.
    pub conversation: Conversation,
    /// The agent's file ledger (stubs and summary file lists come from it).
    pub ledger: FileLedger,
    /// The agent's budget.
    pub policy: BudgetPolicy,
    /// What asked for it.
    pub trigger: CompactTrigger,
    /// Custom instructions / focus for summaries.
    pub instructions: Option<String>,
    /// The requesting agent's own model: used for summaries when no compaction model is set.
    pub agent_model: Option<Arc<dyn ChatModel>>,
    /// The requesting agent's warm per-message token counts (shared, so only messages new
    /// since its last count are counted, and the stubs and summaries made here warm it back).
    pub token_cache: Option<TokenCache>,
}

impl std::fmt::Debug for CompactionJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionJob")
            .field("agent", &self.agent)
            .field("messages", &self.conversation.len())
            .field("trigger", &self.trigger)
            .finish()
    }
}

impl Job for CompactionJob {
    /// The validated compaction (possibly "no compaction needed", or an automatic trigger the
    /// anti-thrash guard skipped; the report says which).
    type Reply = Result<Compaction, CompactionError>;
}

/// A request to write the summary of a closed scope (seed 000's scoped compression): the
/// messages of one finished part of an agent's work become one short summary.
#[derive(Clone)]
pub struct ScopeSummaryJob {
    /// Whose scope it is.
    pub agent: String,
    /// The scope's label.
    pub label: String,
    /// The scope's messages, oldest first.
    pub messages: Vec<ChatMessage>,
    /// What the summary should keep (default: what was done and found).
    pub prompt: Option<String>,
    /// The model that writes the summary.
    pub model: Arc<dyn ChatModel>,
}

impl std::fmt::Debug for ScopeSummaryJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeSummaryJob")
            .field("agent", &self.agent)
            .field("label", &self.label)
            .field("messages", &self.messages.len())
            .finish()
    }
}

impl Job for ScopeSummaryJob {
    /// The summary text, trimmed and never empty.
    type Reply = Result<String, ScopeSummaryError>;
}

/// Why a scope could not be summarized; the scope's messages stay as they are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeSummaryError {
    /// The model call failed.
    #[error("the model failed: {0}")]
    Model(String),
    /// The model answered with nothing.
    #[error("the model returned an empty scope summary")]
    Empty,
}
