//! Spend in the configuration: `[models.NAME] price` (per million tokens),
//! `[agents.NAME] budget` (per request and for the agent as a whole) and `[team] budget` (what
//! every agent built from one configuration spends together; see [`troupe_runtime::budget`]).
//!
//! ```toml
//! [models.gpt]
//! price = { input = 0.15, output = 0.60 }     # per million tokens
//!
//! [models.claude]                              # cached prompt tokens have their own prices
//! price = { input = 3.0, output = 15.0, cache_read = 0.30, cache_write = 3.75 }
//!
//! [agents.coder]
//! budget = { request = { input_tokens = 200000 }, agent = { cost = 5.0 } }
//!
//! [agents.reviewer]                             # once spent, wait (up to 600 s) for a raise
//! budget = { agent = { output_tokens = 50000 }, on_exceeded = "pause", pause_timeout_secs = 600 }
//!
//! [team]
//! budget = { output_tokens = 1000000, cost = 20.0 }
//! ```

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use troupe_agents::spend::{AgentBudget, DEFAULT_PAUSE_TIMEOUT, OnExceeded, RaisedLimits};
use troupe_protocol::{ModelPrice, SpendLimit};
use troupe_runtime::budget::TeamSpend;

use super::validate::Problem;

/// `[models.NAME] price`: what a million tokens cost, in any one currency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Per million prompt tokens.
    pub input: f64,
    /// Per million generated tokens.
    pub output: f64,
    /// Per million prompt tokens read from the provider's prompt cache; left out: `input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Per million prompt tokens written to the provider's prompt cache; left out: `input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

/// `[agents.NAME] budget`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// What one request may spend.
    #[serde(default)]
    pub request: LimitConfig,
    /// What the agent may spend since it started.
    #[serde(default)]
    pub agent: LimitConfig,
    /// What a request does once a budget (its own, the agent's or the team's) is spent: `end`
    /// (the default) or `pause` until a limit is raised.
    #[serde(default)]
    pub on_exceeded: OnExceededConfig,
    /// How long a paused request waits for a raise before it ends (default 240, under the
    /// team's ask timeout); only with `on_exceeded = "pause"`.
    pub pause_timeout_secs: Option<u64>,
}

/// `on_exceeded`: what a request does once a budget is spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExceededConfig {
    /// End with "budget exceeded", keeping what the request added.
    #[default]
    End,
    /// Wait, before the next model call, until a limit is raised.
    Pause,
}

impl BudgetConfig {
    fn on_exceeded(&self) -> OnExceeded {
        match self.on_exceeded {
            OnExceededConfig::End => OnExceeded::End,
            OnExceededConfig::Pause => OnExceeded::Pause {
                timeout: self
                    .pause_timeout_secs
                    .map_or(DEFAULT_PAUSE_TIMEOUT, Duration::from_secs),
            },
        }
    }
}

/// One scope's limits; a limit left out is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitConfig {
    /// Prompt tokens.
    pub input_tokens: Option<u64>,
    /// Generated tokens.
    pub output_tokens: Option<u64>,
    /// Cost, in the currency of the model's `price` (needs one).
    pub cost: Option<f64>,
}

impl LimitConfig {
    fn limit(self) -> SpendLimit {
        SpendLimit {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost_micros: self.cost.map(|c| (c * 1_000_000.0).round() as u64),
        }
    }
}

/// `[team]`: what the agents built from one configuration share. (Not `TeamConfig`: that is
/// the runtime's supervisor settings.)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamSection {
    /// What they may spend together (`budget = { input_tokens = …, output_tokens = …, cost =
    /// … }`); compaction calls count. A cost limit needs a price on every agent's model.
    pub budget: Option<LimitConfig>,
    /// The one meter they share.
    #[serde(skip)]
    spend: SharedTeamSpend,
}

impl TeamSection {
    /// The team's meter when it has a budget: made on the first call, the same one after (and
    /// in every clone of the configuration), so every agent built from it spends from it.
    pub(super) fn spend(&self) -> Option<TeamSpend> {
        let limit = self.budget?.limit();
        Some(self.spend.0.get_or_init(|| TeamSpend::new(limit)).clone())
    }
}

/// A [`TeamSpend`] made once and shared by the configuration's clones. It is not part of what
/// the file says, so two configurations compare equal whatever their meters spent.
#[derive(Debug, Clone, Default)]
struct SharedTeamSpend(Arc<OnceLock<TeamSpend>>);

impl PartialEq for SharedTeamSpend {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// The budget of an agent configured with `budget`, whose model has `price`, in a team that
/// spends from `team`.
pub(super) fn agent_budget(
    budget: Option<BudgetConfig>,
    price: Option<PriceConfig>,
    team: Option<TeamSpend>,
) -> AgentBudget {
    let budget = budget.unwrap_or_default();
    AgentBudget {
        on_exceeded: budget.on_exceeded(),
        raised: RaisedLimits::default(),
        request: budget.request.limit(),
        agent: budget.agent.limit(),
        team,
        price: price.map(|p| ModelPrice {
            input_per_million: p.input,
            output_per_million: p.output,
            cache_read_per_million: p.cache_read,
            cache_write_per_million: p.cache_write,
        }),
    }
}

fn check_amount(key: String, value: f64) -> Result<(), Problem> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err((key, format!("must be a number of at least 0, got {value}")))
    }
}

/// Prices and costs are numbers of at least 0; a cost limit needs the model's price (without
/// one, cost stays 0 and the limit would never hold).
pub(super) fn check(
    agent: &str,
    budget: Option<&BudgetConfig>,
    price: Option<&PriceConfig>,
) -> Result<(), Problem> {
    let Some(budget) = budget else {
        return Ok(());
    };
    if budget.pause_timeout_secs.is_some() && budget.on_exceeded != OnExceededConfig::Pause {
        return Err((
            format!("agents.{agent}.budget.pause_timeout_secs"),
            "only a paused request waits: set on_exceeded = \"pause\" too".to_string(),
        ));
    }
    for (scope, limit) in [("request", budget.request), ("agent", budget.agent)] {
        if let Some(cost) = limit.cost {
            let key = format!("agents.{agent}.budget.{scope}.cost");
            check_amount(key.clone(), cost)?;
            if price.is_none() {
                return Err((
                    key,
                    "needs a price on the agent's model ([models.NAME] price = { input = …, output = … })"
                        .to_string(),
                ));
            }
        }
    }
    Ok(())
}

/// The team's limits: a cost is a number of at least 0 and needs a price on every agent's
/// model (`prices` lists each agent's, by name) — an agent without one would spend from the
/// team's tokens but never from its cost.
pub(super) fn check_team(
    team: &TeamSection,
    prices: &[(&str, Option<&PriceConfig>)],
) -> Result<(), Problem> {
    let Some(cost) = team.budget.and_then(|b| b.cost) else {
        return Ok(());
    };
    let key = "team.budget.cost".to_string();
    check_amount(key.clone(), cost)?;
    if let Some((agent, _)) = prices.iter().find(|(_, price)| price.is_none()) {
        return Err((
            key,
            format!(
                "needs a price on every agent's model; agents.{agent}'s model has none \
                 ([models.NAME] price = {{ input = …, output = … }})"
            ),
        ));
    }
    Ok(())
}

/// A model's price: numbers of at least 0.
pub(super) fn check_price(model: &str, price: Option<&PriceConfig>) -> Result<(), Problem> {
    if let Some(price) = price {
        check_amount(format!("models.{model}.price.input"), price.input)?;
        check_amount(format!("models.{model}.price.output"), price.output)?;
        for (key, value) in [
            ("cache_read", price.cache_read),
            ("cache_write", price.cache_write),
        ] {
            if let Some(value) = value {
                check_amount(format!("models.{model}.price.{key}"), value)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use troupe_models::ScriptedModel;
    use troupe_protocol::ChatModel;
    use troupe_protocol::{Spend, SpendLimit};

    use super::super::Config;

    #[test]
    fn budget_and_price_reach_the_agents_spec() {
        let config = Config::parse(
            "[models.m]\nprovider = \"openai\"\nprice = { input = 3.0, output = 15.0 }\n\
             [agents.coder]\nbudget = { request = { input_tokens = 1000 }, agent = { cost = 2.5 } }\n",
        )
        .unwrap();
        let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("m", []));
        let models = BTreeMap::from([("m".to_string(), model)]);
        let spec = config.agent_spec("coder", &models, None).unwrap();
        assert_eq!(spec.budget.request.input_tokens, Some(1000));
        assert_eq!(spec.budget.agent.cost_micros, Some(2_500_000));
        let price = spec.budget.price.unwrap();
        assert_eq!(price.input_per_million, 3.0);
        assert_eq!(price.output_per_million, 15.0);
        // No cache prices: cached prompt tokens are priced as input.
        assert_eq!(price.cache_read_per_million, None);
        assert_eq!(price.cache_write_per_million, None);
    }

    #[test]
    fn cache_prices_reach_the_agents_spec_and_a_negative_one_is_refused_by_key() {
        let config = Config::parse(
            "[models.m]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
             price = { input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }\n\
             [agents.coder]\n",
        )
        .unwrap();
        let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("m", []));
        let models = BTreeMap::from([("m".to_string(), model)]);
        let price = config
            .agent_spec("coder", &models, None)
            .unwrap()
            .budget
            .price
            .unwrap();
        assert_eq!(price.cache_read_per_million, Some(0.3));
        assert_eq!(price.cache_write_per_million, Some(3.75));
        let err = Config::parse(
            "[models.m]\nprovider = \"openai\"\nprice = { input = 1.0, output = 1.0, cache_read = -0.5 }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("models.m.price.cache_read"), "{err}");
        let err = Config::parse(
            "[models.m]\nprovider = \"openai\"\nprice = { input = 1.0, output = 1.0, cache_reads = 0.5 }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("cache_reads"), "{err}");
    }

    #[test]
    fn on_exceeded_reaches_the_agents_spec_and_a_bad_value_is_refused_by_key() {
        use std::time::Duration;
        use troupe_agents::spend::{DEFAULT_PAUSE_TIMEOUT, OnExceeded};

        let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("m", []));
        let models = BTreeMap::from([("m".to_string(), model)]);
        let on_exceeded = |toml: &str| {
            let config = Config::parse(&format!(
                "[models.m]\nprovider = \"openai\"\n[agents.coder]\n{toml}"
            ))
            .unwrap();
            config
                .agent_spec("coder", &models, None)
                .unwrap()
                .budget
                .on_exceeded
        };
        assert_eq!(on_exceeded(""), OnExceeded::End);
        assert_eq!(
            on_exceeded("budget = { on_exceeded = \"end\" }"),
            OnExceeded::End
        );
        assert_eq!(
            on_exceeded("budget = { on_exceeded = \"pause\" }"),
            OnExceeded::Pause {
                timeout: DEFAULT_PAUSE_TIMEOUT
            }
        );
        assert_eq!(
            on_exceeded("budget = { on_exceeded = \"pause\", pause_timeout_secs = 30 }"),
            OnExceeded::Pause {
                timeout: Duration::from_secs(30)
            }
        );
        let err = Config::parse("[agents.coder]\nbudget = { on_exceeded = \"wait\" }\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("budget.on_exceeded"), "{err}");
        assert!(err.contains("`end`") && err.contains("`pause`"), "{err}");
        let err = Config::parse("[agents.coder]\nbudget = { pause_timeout_secs = 30 }\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("agents.coder.budget.pause_timeout_secs"),
            "{err}"
        );
    }

    #[test]
    fn every_agent_built_from_one_config_spends_from_one_team_budget() {
        let config = Config::parse(
            "[models.m]\nprovider = \"openai\"\nprice = { input = 3.0, output = 15.0 }\n\
             [agents.a]\n[agents.b]\n[team]\nbudget = { output_tokens = 100, cost = 2.0 }\n",
        )
        .unwrap();
        let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("m", []));
        let models = BTreeMap::from([("m".to_string(), model)]);
        let a = config.agent_spec("a", &models, None).unwrap().budget.team;
        let b = config.agent_spec("b", &models, None).unwrap().budget.team;
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(
            a.limit(),
            SpendLimit {
                output_tokens: Some(100),
                cost_micros: Some(2_000_000),
                ..SpendLimit::default()
            }
        );
        // One meter: what one agent spends, the other sees.
        a.record(Spend {
            output_tokens: 40,
            ..Spend::default()
        });
        assert_eq!(b.spent().output_tokens, 40);
        // So does an agent built from a clone of the configuration.
        let c = config.clone().agent_spec("a", &models, None).unwrap();
        assert_eq!(c.budget.team.unwrap().spent().output_tokens, 40);
        // Without [team] budget no agent has a team budget.
        let none = Config::parse("[models.m]\nprovider = \"openai\"\n[agents.a]\n").unwrap();
        assert!(
            none.agent_spec("a", &models, None)
                .unwrap()
                .budget
                .team
                .is_none()
        );
    }

    #[test]
    fn a_bad_team_budget_is_refused_by_key() {
        let err = Config::parse("[team]\nbudget = { tokens = 5 }\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("team.budget"), "{err}");
        let err = Config::parse("[team]\nbudgets = { input_tokens = 5 }\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("team"), "{err}");
        // A cost limit with an agent whose model has no price, and a negative cost.
        let err = Config::parse(
            "[models.m]\nprovider = \"openai\"\nprice = { input = 1.0, output = 1.0 }\n\
             [models.n]\nprovider = \"openai\"\n\
             [agents.a]\nmodel = \"m\"\n[agents.b]\nmodel = \"n\"\n\
             [team]\nbudget = { cost = 1.0 }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("team.budget.cost"), "{err}");
        assert!(err.contains("agents.b's model has none"), "{err}");
        let err = Config::parse("[team]\nbudget = { cost = -1.0 }\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("team.budget.cost"), "{err}");
    }

    #[test]
    fn a_cost_limit_without_a_price_or_a_negative_amount_is_refused_by_key() {
        let err = Config::parse(
            "[models.m]\nprovider = \"openai\"\n[agents.coder]\nbudget = { agent = { cost = 1.0 } }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("agents.coder.budget.agent.cost"), "{err}");
        assert!(err.contains("needs a price"), "{err}");
        let err = Config::parse(
            "[models.m]\nprovider = \"openai\"\nprice = { input = -1.0, output = 1.0 }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("models.m.price.input"), "{err}");
        let err = Config::parse("[agents.coder]\nbudget = { request = { tokens = 5 } }\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("budget.request"), "{err}");
    }
}
