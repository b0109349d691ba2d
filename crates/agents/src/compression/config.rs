//! [`CompressionConfig`]: how the compression agent is set up, and [`CompressorModel`]: which
//! model it summarises with.

use std::fmt;
use std::sync::Arc;

use troupe_protocol::ChatModel;
use troupe_tokens::TokenCounter;

use crate::compaction_settings::shared_counter;

/// Model tool-loop iterations before the deterministic planner takes over.
pub const DEFAULT_MAX_ITERATIONS: u32 = 6;

/// Compactions run at once by default: one, as a model with one queue (the local model) runs
/// one call at a time anyway.
pub const DEFAULT_MAX_CONCURRENT: usize = 1;

/// Which model the compression agent summarises with.
#[derive(Clone, Default)]
pub enum CompressorModel {
    /// No model at all: tiers 1–2, the deterministic planner and mechanical summaries only.
    None,
    /// The model of the agent whose conversation is compacted. A compaction that arrives
    /// without one (from another node) gets no model, as with [`CompressorModel::None`].
    #[default]
    AgentsOwn,
    /// The model of the agent whose conversation is compacted, or this one for a compaction
    /// that arrives without one (from another node: a model does not cross the wire).
    AgentsOwnOr(Arc<dyn ChatModel>),
    /// This model, whichever agent asks.
    Fixed(Arc<dyn ChatModel>),
}

impl CompressorModel {
    /// The model one compaction uses, given the asking agent's model when it sent one.
    pub fn pick(&self, agent_model: Option<&Arc<dyn ChatModel>>) -> Option<Arc<dyn ChatModel>> {
        match self {
            CompressorModel::None => None,
            CompressorModel::AgentsOwn => agent_model.cloned(),
            CompressorModel::AgentsOwnOr(model) => Some(Arc::clone(agent_model.unwrap_or(model))),
            CompressorModel::Fixed(model) => Some(Arc::clone(model)),
        }
    }
}

impl fmt::Debug for CompressorModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompressorModel::None => f.write_str("None"),
            CompressorModel::AgentsOwn => f.write_str("AgentsOwn"),
            CompressorModel::AgentsOwnOr(model) => f
                .debug_tuple("AgentsOwnOr")
                .field(&model.info().name)
                .finish(),
            CompressorModel::Fixed(model) => {
                f.debug_tuple("Fixed").field(&model.info().name).finish()
            }
        }
    }
}

/// How the compression agent is set up: the one type that configures it (a config file's
/// `[compaction] model` and `max_concurrent` are its file form). The default: the asking
/// agent's own model, the process-wide token counter ([`shared_counter`]),
/// [`DEFAULT_MAX_ITERATIONS`] and [`DEFAULT_MAX_CONCURRENT`].
#[derive(Clone)]
pub struct CompressionConfig {
    /// The model it summarises with.
    pub model: CompressorModel,
    /// The token counter it measures conversations with.
    pub counter: Arc<dyn TokenCounter>,
    /// Model tool-loop iterations before the deterministic planner finishes.
    pub max_iterations: u32,
    /// Jobs (of different agents) run at once; a remote model that serves calls in parallel
    /// may take more than one. Jobs of one agent never overlap, whatever this says; 0 counts
    /// as 1.
    pub max_concurrent: usize,
}

impl CompressionConfig {
    /// The default configuration counting tokens with `counter`.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        CompressionConfig {
            model: CompressorModel::default(),
            counter,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
        }
    }
}

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig::new(shared_counter())
    }
}

impl fmt::Debug for CompressionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompressionConfig")
            .field("model", &self.model)
            .field("max_iterations", &self.max_iterations)
            .field("max_concurrent", &self.max_concurrent)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_models::ScriptedModel;

    fn model(name: &str) -> Arc<dyn ChatModel> {
        Arc::new(ScriptedModel::new(name, []))
    }

    fn picked(choice: &CompressorModel, agent: Option<&Arc<dyn ChatModel>>) -> Option<String> {
        choice.pick(agent).map(|m| m.info().name)
    }

    #[test]
    fn the_default_uses_the_agents_own_model_and_the_default_bound() {
        let config = CompressionConfig::default();
        assert!(matches!(config.model, CompressorModel::AgentsOwn));
        assert_eq!(config.max_iterations, DEFAULT_MAX_ITERATIONS);
        assert_eq!(config.max_concurrent, DEFAULT_MAX_CONCURRENT);
    }

    #[test]
    fn each_choice_picks_its_model() {
        let agent = model("agent");
        let fixed = CompressorModel::Fixed(model("fixed"));
        assert_eq!(picked(&CompressorModel::None, Some(&agent)), None);
        assert_eq!(
            picked(&CompressorModel::AgentsOwn, Some(&agent)).as_deref(),
            Some("agent")
        );
        assert_eq!(picked(&CompressorModel::AgentsOwn, None), None);
        assert_eq!(picked(&fixed, Some(&agent)).as_deref(), Some("fixed"));
        assert_eq!(picked(&fixed, None).as_deref(), Some("fixed"));
        let own_or = CompressorModel::AgentsOwnOr(model("node"));
        assert_eq!(picked(&own_or, Some(&agent)).as_deref(), Some("agent"));
        assert_eq!(picked(&own_or, None).as_deref(), Some("node"));
    }
}
