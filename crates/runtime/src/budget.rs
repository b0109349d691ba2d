//! Spend budgets: tokens (input, output) and cost, per request, per agent and per team.
//!
//! A budget is checked before every model call of an agent: once what a scope has spent
//! reaches one of its limits, the request ends with [`BudgetExceeded`] instead of calling the
//! model again. Nothing is lost: what the request added so far (answers, tool results) stays
//! in the conversation and the session log. Compaction calls count too (a summary written by a
//! model is spend like any other call), priced at the agent's model's prices.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::Usage;

/// Tokens and cost spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spend {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Cost in millionths of the prices' currency (0 when no prices are set): whole numbers,
    /// so sums are exact and a spend compares equal to itself after a round trip.
    pub cost_micros: u64,
}

impl Spend {
    /// What one call of `usage` costs at `price` (no price: tokens only).
    pub fn of(usage: Usage, price: Option<ModelPrice>) -> Spend {
        // A price per million tokens is the price of one token in millionths.
        let cost_micros = price.map_or(0, |p| {
            (usage.input_tokens as f64 * p.input_per_million
                + usage.output_tokens as f64 * p.output_per_million)
                .round() as u64
        });
        Spend {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cost_micros,
        }
    }

    /// This spend and `more`.
    pub fn add(&mut self, more: Spend) {
        self.input_tokens += more.input_tokens;
        self.output_tokens += more.output_tokens;
        self.cost_micros += more.cost_micros;
    }
}

impl std::fmt::Display for Spend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} input + {} output tokens, cost {:.4}",
            self.input_tokens,
            self.output_tokens,
            self.cost_micros as f64 / 1_000_000.0
        )
    }
}

/// A model's prices per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// Per million prompt tokens.
    pub input_per_million: f64,
    /// Per million generated tokens.
    pub output_per_million: f64,
}

/// The most a scope may spend; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendLimit {
    /// Prompt tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Cost, in millionths of the prices' currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<u64>,
}

impl SpendLimit {
    /// Whether `spent` has reached one of the limits (no further call may start).
    pub fn reached_by(&self, spent: &Spend) -> bool {
        self.input_tokens.is_some_and(|l| spent.input_tokens >= l)
            || self.output_tokens.is_some_and(|l| spent.output_tokens >= l)
            || self.cost_micros.is_some_and(|l| spent.cost_micros >= l)
    }

    /// Whether no limit is set.
    pub fn is_unlimited(&self) -> bool {
        self.input_tokens.is_none() && self.output_tokens.is_none() && self.cost_micros.is_none()
    }
}

impl std::fmt::Display for SpendLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(n) = self.input_tokens {
            parts.push(format!("{n} input tokens"));
        }
        if let Some(n) = self.output_tokens {
            parts.push(format!("{n} output tokens"));
        }
        if let Some(c) = self.cost_micros {
            parts.push(format!("cost {:.4}", c as f64 / 1_000_000.0));
        }
        if parts.is_empty() {
            f.write_str("no limit")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// Which budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// The request being answered.
    Request,
    /// Everything the agent spent since it started.
    Agent,
    /// Everything the agents sharing a [`TeamSpend`] spent.
    Team,
}

impl std::fmt::Display for BudgetScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BudgetScope::Request => "request",
            BudgetScope::Agent => "agent",
            BudgetScope::Team => "team",
        })
    }
}

/// A request ended because a budget was spent; nothing it added so far is lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{scope} budget exceeded: spent {spent}; limit {limit}")]
pub struct BudgetExceeded {
    /// What the scope has spent.
    pub spent: Spend,
    /// Its limit.
    pub limit: SpendLimit,
    /// Which budget.
    pub scope: BudgetScope,
}

/// What a team spends, shared by the agents given the same one (clones share it), with the
/// team's limit.
#[derive(Debug, Clone, Default)]
pub struct TeamSpend {
    spent: Arc<Mutex<Spend>>,
    limit: SpendLimit,
}

impl TeamSpend {
    /// A team budget of `limit`, nothing spent yet.
    pub fn new(limit: SpendLimit) -> Self {
        TeamSpend {
            spent: Arc::default(),
            limit,
        }
    }

    /// The team's limit.
    pub fn limit(&self) -> SpendLimit {
        self.limit
    }

    /// What the team has spent.
    pub fn spent(&self) -> Spend {
        // A poisoned lock still holds a valid sum: a panic cannot leave it half-added.
        *self.spent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Add `more` to what the team has spent.
    pub fn record(&self, more: Spend) {
        self.spent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(more);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_reached_at_equality_and_priced_per_million() {
        let price = ModelPrice {
            input_per_million: 2.0,
            output_per_million: 8.0,
        };
        let spend = Spend::of(
            Usage {
                input_tokens: 500_000,
                output_tokens: 100_000,
                ..Default::default()
            },
            Some(price),
        );
        assert_eq!(spend.cost_micros, 1_800_000);
        let limit = SpendLimit {
            output_tokens: Some(100_000),
            ..SpendLimit::default()
        };
        assert!(limit.reached_by(&spend));
        assert!(!SpendLimit::default().reached_by(&spend));
        let team = TeamSpend::new(limit);
        let clone = team.clone();
        clone.record(spend);
        assert_eq!(team.spent(), spend);
    }
}
