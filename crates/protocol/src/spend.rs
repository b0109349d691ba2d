//! What model calls cost and the limits on it: tokens (input, output) and cost, per request,
//! per agent and per team.
//!
//! A budget is checked before every model call of an agent: once what a scope has spent
//! reaches one of its limits, the request ends with [`BudgetExceeded`] instead of calling the
//! model again — or, when the agent's policy says pause, waits there until a limit is raised
//! (the runtime's `TeamSpend::set_limit` for the team's; see `Event::BudgetPaused`). Nothing is
//! lost: what the request added so far (answers, tool results) stays in the conversation and
//! the session log. Compaction calls count too (a summary written by a model is spend like any
//! other call), priced at the agent's model's prices.

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
    /// What one call of `usage` costs at `price` (no price: tokens only). The prompt tokens
    /// read from or written to the provider's cache are priced at the cache prices, the rest
    /// of the prompt at the input price: [`Usage::input_tokens`] counts all of them, whichever
    /// provider answered, so none is priced twice.
    pub fn of(usage: Usage, price: Option<ModelPrice>) -> Spend {
        let cost_micros = price.map_or(0, |p| p.cost_micros(usage));
        Spend {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cost_micros,
        }
    }

    /// This spend and `more`, saturating: the counts are what providers reported, and an
    /// absurd one must stop at the most a budget can hold, not wrap to a small spend.
    pub fn add(&mut self, more: Spend) {
        self.input_tokens = self.input_tokens.saturating_add(more.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(more.output_tokens);
        self.cost_micros = self.cost_micros.saturating_add(more.cost_micros);
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
    /// Per million prompt tokens (those neither read from nor written to a prompt cache).
    pub input_per_million: f64,
    /// Per million generated tokens.
    pub output_per_million: f64,
    /// Per million prompt tokens read from the provider's prompt cache
    /// ([`Usage::cache_read_input_tokens`]; Anthropic bills 0.1× input, OpenAI 0.1–0.5×).
    /// `None`: priced as input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_million: Option<f64>,
    /// Per million prompt tokens written to the provider's prompt cache
    /// ([`Usage::cache_creation_input_tokens`]; Anthropic bills 1.25× input for its 5-minute
    /// cache). `None`: priced as input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_million: Option<f64>,
}

impl ModelPrice {
    /// Prices for input and output tokens; cached prompt tokens priced as input.
    pub fn new(input_per_million: f64, output_per_million: f64) -> Self {
        ModelPrice {
            input_per_million,
            output_per_million,
            cache_read_per_million: None,
            cache_write_per_million: None,
        }
    }

    /// What `usage` costs, in millionths: a price per million tokens is the price of one
    /// token in millionths.
    fn cost_micros(&self, usage: Usage) -> u64 {
        let read = usage.cache_read_input_tokens;
        let written = usage.cache_creation_input_tokens;
        // Saturating: a provider reporting more cached tokens than prompt tokens must not
        // wrap into an enormous plain-input count.
        let plain = usage
            .input_tokens
            .saturating_sub(read)
            .saturating_sub(written);
        let read_price = self
            .cache_read_per_million
            .unwrap_or(self.input_per_million);
        let write_price = self
            .cache_write_per_million
            .unwrap_or(self.input_per_million);
        (plain as f64 * self.input_per_million
            + read as f64 * read_price
            + written as f64 * write_price
            + usage.output_tokens as f64 * self.output_per_million)
            .round() as u64
    }
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
    /// Everything the agents sharing a `TeamSpend` spent.
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
