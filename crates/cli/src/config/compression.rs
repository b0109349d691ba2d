//! The compression agent a configuration asks for: its model chosen by the one rule
//! ([`troupe_models::compaction_model`]) that `troupe chat` and `troupe node` share.

use std::collections::BTreeMap;
use std::sync::Arc;

use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_models::{CompactionModelSource, UnknownCompactionModel, compaction_model};
use troupe_protocol::ChatModel;

use super::Config;

impl Config {
    /// Which model compaction uses: `[compaction] model`, else the configured model with the
    /// lowest `cost_rank`, else each agent's own. A caller that builds models lazily builds
    /// [`CompactionModelSource::model_name`] too.
    ///
    /// # Errors
    /// [`UnknownCompactionModel`] when `[compaction] model` names no `[models]` entry (a loaded
    /// configuration was checked for that already).
    pub fn compaction_model(&self) -> Result<CompactionModelSource, UnknownCompactionModel> {
        let ranked: Vec<(&str, Option<u32>)> = self
            .models
            .iter()
            .map(|(name, model)| (name.as_str(), model.cost_rank))
            .collect();
        compaction_model(&ranked, self.compaction.model.as_deref())
    }

    /// The compression agent's configuration: the model [`Config::compaction_model`] chooses,
    /// taken from `models` (the built models by `[models]` key), and the defaults otherwise.
    /// When that is each agent's own, a compaction from another node (it carries no model)
    /// uses the first of `models`, else `default` (the model agents get when none is
    /// configured), so a node's compressor summarises with a model for every asker.
    ///
    /// # Errors
    /// [`UnknownCompactionModel`] when the chosen model is not configured, or not in `models`.
    pub fn compression_config(
        &self,
        models: &BTreeMap<String, Arc<dyn ChatModel>>,
        default: Option<&Arc<dyn ChatModel>>,
    ) -> Result<CompressionConfig, UnknownCompactionModel> {
        let source = self.compaction_model()?;
        let model = match source.model_name() {
            None => match models.values().next().or(default) {
                Some(model) => CompressorModel::AgentsOwnOr(Arc::clone(model)),
                None => CompressorModel::AgentsOwn,
            },
            Some(name) => CompressorModel::Fixed(models.get(name).cloned().ok_or_else(|| {
                UnknownCompactionModel {
                    name: name.to_string(),
                    known: models.keys().cloned().collect::<Vec<_>>().join(", "),
                }
            })?),
        };
        Ok(CompressionConfig {
            model,
            max_concurrent: self.compaction.max_concurrent,
            ..CompressionConfig::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_models::ScriptedModel;

    const MODELS: &str = r#"
[models.big]
provider = "local"
cost_rank = 10
[models.small]
provider = "local"
cost_rank = 2
[models.plain]
provider = "local"
"#;

    fn built(names: &[&str]) -> BTreeMap<String, Arc<dyn ChatModel>> {
        names
            .iter()
            .map(|n| {
                let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new(*n, []));
                (n.to_string(), model)
            })
            .collect()
    }

    fn fixed_name(config: &CompressionConfig) -> Option<String> {
        match &config.model {
            CompressorModel::Fixed(model) => Some(model.info().name),
            CompressorModel::AgentsOwn => None,
            CompressorModel::AgentsOwnOr(model) => Some(format!("own, else {}", model.info().name)),
            CompressorModel::None => Some("<none>".into()),
        }
    }

    #[test]
    fn the_named_model_wins_then_the_cheapest_ranked_one() {
        let models = built(&["big", "small", "plain"]);
        let named = Config::parse(&format!("{MODELS}[compaction]\nmodel = \"big\"\n")).unwrap();
        assert_eq!(
            named.compaction_model(),
            Ok(CompactionModelSource::Configured("big".into()))
        );
        let config = named.compression_config(&models, None).unwrap();
        assert_eq!(fixed_name(&config).as_deref(), Some("big"));

        let ranked = Config::parse(MODELS).unwrap();
        assert_eq!(
            ranked.compaction_model(),
            Ok(CompactionModelSource::Cheapest("small".into()))
        );
        let config = ranked.compression_config(&models, None).unwrap();
        assert_eq!(fixed_name(&config).as_deref(), Some("small"));
    }

    #[test]
    fn without_a_name_or_a_rank_each_agent_compacts_with_its_own_model() {
        let config = Config::parse("[models.plain]\nprovider = \"local\"\n").unwrap();
        assert_eq!(
            config.compaction_model(),
            Ok(CompactionModelSource::AgentOwn)
        );
        // A compaction from another node carries no model: the first configured one serves.
        let compression = config.compression_config(&built(&["plain"]), None).unwrap();
        assert_eq!(fixed_name(&compression).as_deref(), Some("own, else plain"));
        let empty = Config::default();
        assert_eq!(
            empty.compaction_model(),
            Ok(CompactionModelSource::AgentOwn)
        );
        let compression = empty.compression_config(&built(&[]), None).unwrap();
        assert_eq!(fixed_name(&compression), None);
        let default = built(&["default"]);
        let compression = empty
            .compression_config(&built(&[]), default.get("default"))
            .unwrap();
        assert_eq!(
            fixed_name(&compression).as_deref(),
            Some("own, else default")
        );
    }

    #[test]
    fn max_concurrent_reaches_the_compression_agent() {
        let models = built(&[]);
        let default = Config::default().compression_config(&models, None).unwrap();
        assert_eq!(
            default.max_concurrent,
            troupe_agents::compression::DEFAULT_MAX_CONCURRENT
        );
        let four = Config::parse("[compaction]\nmax_concurrent = 4\n").unwrap();
        assert_eq!(
            four.compression_config(&models, None)
                .unwrap()
                .max_concurrent,
            4
        );
    }

    #[test]
    fn a_chosen_model_that_was_not_built_is_an_error() {
        let config = Config::parse(MODELS).unwrap();
        let err = config
            .compression_config(&built(&["big"]), None)
            .err()
            .unwrap();
        assert_eq!(err.name, "small");
    }
}
