//! Spend in the configuration: `[models.NAME] price` (per million tokens) and
//! `[agents.NAME] budget` (per request and for the agent as a whole; see
//! [`troupe_runtime::budget`]).
//!
//! ```toml
//! [models.gpt]
//! price = { input = 0.15, output = 0.60 }     # per million tokens
//!
//! [agents.coder]
//! budget = { request = { input_tokens = 200000 }, agent = { cost = 5.0 } }
//! ```

use serde::{Deserialize, Serialize};
use troupe_agents::spend::AgentBudget;
use troupe_runtime::budget::{ModelPrice, SpendLimit};

use super::validate::Problem;

/// `[models.NAME] price`: what a million tokens cost, in any one currency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Per million prompt tokens.
    pub input: f64,
    /// Per million generated tokens.
    pub output: f64,
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

/// The budget of an agent configured with `budget`, whose model has `price`.
pub(super) fn agent_budget(
    budget: Option<BudgetConfig>,
    price: Option<PriceConfig>,
) -> AgentBudget {
    let budget = budget.unwrap_or_default();
    AgentBudget {
        request: budget.request.limit(),
        agent: budget.agent.limit(),
        team: None,
        price: price.map(|p| ModelPrice {
            input_per_million: p.input,
            output_per_million: p.output,
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

/// A model's price: numbers of at least 0.
pub(super) fn check_price(model: &str, price: Option<&PriceConfig>) -> Result<(), Problem> {
    if let Some(price) = price {
        check_amount(format!("models.{model}.price.input"), price.input)?;
        check_amount(format!("models.{model}.price.output"), price.output)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use troupe_agents::model::ScriptedModel;
    use troupe_runtime::ChatModel;

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
