//! What an agent sends the compression agent, and what comes back.

use std::sync::Arc;

use troupe_compaction::{BudgetPolicy, CompactTrigger, Compaction};
use troupe_runtime::{ChatModel, Conversation};
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

/// The compression agent's answer: the validated compaction (possibly "no compaction needed").
pub type CompactionResult = Result<Compaction, String>;
