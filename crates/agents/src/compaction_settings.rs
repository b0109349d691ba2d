//! An agent's compaction settings (the `[compaction]` section of the config) and the shared
//! token counter they default to.

use std::sync::{Arc, OnceLock};

use troupe_compaction::{BudgetPolicy, TiktokenCounter, TokenCounter};

/// An agent's compaction settings (the `[compaction]` section of the config).
#[derive(Clone)]
pub struct CompactionSettings {
    /// The budget; `None` derives it from the model's context window with default thresholds.
    pub policy: Option<BudgetPolicy>,
    /// Whether the trigger threshold compacts automatically.
    pub auto: bool,
    /// The token counter; `None` uses the shared o200k BPE counter.
    pub counter: Option<Arc<dyn TokenCounter>>,
    /// Whether the agent gets the `compact` tool.
    pub agent_tool: bool,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            policy: None,
            auto: true,
            counter: None,
            agent_tool: false,
        }
    }
}

impl CompactionSettings {
    /// The policy for a model with this context window.
    pub fn policy_for(&self, context_window: usize) -> BudgetPolicy {
        self.policy
            .clone()
            .unwrap_or_else(|| BudgetPolicy::for_window(context_window))
    }

    /// The counter to use.
    pub fn counter(&self) -> Arc<dyn TokenCounter> {
        self.counter.clone().unwrap_or_else(shared_counter)
    }
}

/// The process-wide exact BPE counter (building its tables is expensive; do it once).
pub fn shared_counter() -> Arc<dyn TokenCounter> {
    static COUNTER: OnceLock<Arc<dyn TokenCounter>> = OnceLock::new();
    COUNTER
        .get_or_init(|| Arc::new(TiktokenCounter::default()))
        .clone()
}
