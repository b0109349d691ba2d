//! Spend budgets: tokens (input, output) and cost, per request, per agent and per team.
//!
//! A budget is checked before every model call of an agent: once what a scope has spent reaches one
//! of its limits, the request ends with [`BudgetExceeded`](troupe_protocol::BudgetExceeded) instead
//! of calling the model again — or, when the agent's policy says pause, waits there until a limit
//! is raised ([`TeamSpend::set_limit`] for the team's; see `Event::BudgetPaused`). Nothing is lost:
//! what the request added so far (answers, tool results) stays in the conversation and the session
//! log. Compaction calls count too (a summary written by a model is spend like any other call),
//! priced at the agent's model's prices.

use std::sync::{Arc, Mutex};

use troupe_protocol::{Spend, SpendLimit};

/// What a team spends, shared by the agents given the same one (clones share it), with the
/// team's limit (shared too: [`TeamSpend::set_limit`] changes it for every clone).
#[derive(Debug, Clone, Default)]
pub struct TeamSpend {
    spent: Arc<Mutex<Spend>>,
    /// A watch, not a plain lock: an agent paused on the team's budget waits for a change.
    limit: tokio::sync::watch::Sender<SpendLimit>,
}

impl TeamSpend {
    /// A team budget of `limit`, nothing spent yet.
    pub fn new(limit: SpendLimit) -> Self {
        TeamSpend {
            spent: Arc::default(),
            limit: tokio::sync::watch::Sender::new(limit),
        }
    }

    /// The team's limit.
    pub fn limit(&self) -> SpendLimit {
        *self.limit.borrow()
    }

    /// Change the team's limit (raise it, say, to let agents paused on it go on): every agent
    /// sharing this budget checks against the new one from its next model call.
    pub fn set_limit(&self, limit: SpendLimit) {
        self.limit.send_replace(limit);
    }

    /// Follows the team's limit: `changed()` resolves after the next [`TeamSpend::set_limit`].
    pub fn watch_limit(&self) -> tokio::sync::watch::Receiver<SpendLimit> {
        self.limit.subscribe()
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
    use troupe_protocol::{ModelPrice, Usage};

    #[test]
    fn a_limit_is_reached_at_equality_and_priced_per_million() {
        let price = ModelPrice::new(2.0, 8.0);
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

    #[test]
    fn cached_prompt_tokens_are_priced_at_the_cache_prices_and_never_twice() {
        // 1000 prompt tokens, of them 600 read from the cache and 300 written to it.
        let usage = Usage {
            input_tokens: 1000,
            output_tokens: 10,
            cache_read_input_tokens: 600,
            cache_creation_input_tokens: 300,
        };
        let plain = ModelPrice::new(3.0, 15.0);
        let cached = ModelPrice {
            cache_read_per_million: Some(0.3),
            cache_write_per_million: Some(3.75),
            ..plain
        };
        // 100 × 3 + 600 × 0.3 + 300 × 3.75 + 10 × 15 = 300 + 180 + 1125 + 150.
        assert_eq!(Spend::of(usage, Some(cached)).cost_micros, 1755);
        // Without cache prices the cached tokens cost what input costs: 1000 × 3 + 10 × 15.
        assert_eq!(Spend::of(usage, Some(plain)).cost_micros, 3150);
        // Tokens stay the prompt's tokens, whatever they cost.
        assert_eq!(Spend::of(usage, Some(cached)).input_tokens, 1000);
        // A provider claiming more cached tokens than prompt tokens leaves no plain input (no
        // wrap-around): only the 200 cache reads are priced.
        let odd = Usage {
            input_tokens: 100,
            cache_read_input_tokens: 200,
            ..Usage::default()
        };
        assert_eq!(Spend::of(odd, Some(cached)).cost_micros, 60);
    }

    proptest::proptest! {
        /// Whatever counts providers report (`u64::MAX` included), spends priced and added up
        /// — per request, per agent, for a team — never panic and never wrap: the tokens are
        /// the saturating sums, and neither they nor the cost ever go down.
        #[test]
        fn spends_add_up_saturating_and_never_go_down(
            calls in proptest::collection::vec(proptest::prelude::any::<[u64; 4]>(), 1..6),
            at_the_edge in proptest::prelude::any::<bool>(),
        ) {
            let price = ModelPrice {
                cache_read_per_million: Some(0.3),
                cache_write_per_million: Some(3.75),
                ..ModelPrice::new(3.0, 15.0)
            };
            let team = TeamSpend::new(SpendLimit::default());
            let (mut input, mut output) = (0u64, 0u64);
            let mut last = Spend::default();
            for (i, [a, b, read, written]) in calls.into_iter().enumerate() {
                // Half the cases start at the edge, where a wrap shows at once.
                let edge = |n: u64| if at_the_edge && i == 0 { u64::MAX - n % 3 } else { n };
                let usage = Usage {
                    input_tokens: edge(a),
                    output_tokens: edge(b),
                    cache_read_input_tokens: read,
                    cache_creation_input_tokens: written,
                };
                team.record(Spend::of(usage, Some(price)));
                input = input.saturating_add(usage.input_tokens);
                output = output.saturating_add(usage.output_tokens);
                let spent = team.spent();
                proptest::prop_assert_eq!((spent.input_tokens, spent.output_tokens), (input, output));
                proptest::prop_assert!(spent.cost_micros >= last.cost_micros);
                last = spent;
            }
        }
    }
}
