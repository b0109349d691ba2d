//! An agent's budgets and the meter that enforces them (see [`troupe_runtime::budget`]).
//!
//! The meter is shared between the agent, which records every model call it makes and checks
//! the budgets before the next one, and the compaction client, which records what a
//! compaction's summarizer spent (the one road every compaction takes, whoever compresses):
//! compaction calls count against the request, the agent and the team like any other call.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use troupe_runtime::Usage;
use troupe_runtime::budget::{
    BudgetExceeded, BudgetScope, ModelPrice, Spend, SpendLimit, TeamSpend,
};

/// An agent's budgets: per request, for the agent as a whole (since it started), and the
/// team's (shared by every agent given a clone of the same [`TeamSpend`]); with the prices of
/// its model, which cost limits need.
///
/// ```
/// use troupe_agents::spend::AgentBudget;
/// use troupe_runtime::budget::{SpendLimit, TeamSpend};
///
/// let team = TeamSpend::new(SpendLimit { output_tokens: Some(50_000), ..SpendLimit::default() });
/// let budget = AgentBudget {
///     request: SpendLimit { input_tokens: Some(200_000), ..SpendLimit::default() },
///     team: Some(team.clone()),
///     ..AgentBudget::default()
/// };
/// # let _ = budget;
/// ```
#[derive(Debug, Clone, Default)]
pub struct AgentBudget {
    /// What one request may spend.
    pub request: SpendLimit,
    /// What the agent may spend since it started (a restarted agent starts again at zero).
    pub agent: SpendLimit,
    /// The team's budget, shared.
    pub team: Option<TeamSpend>,
    /// The model's prices (no prices: cost stays 0 and cost limits are never reached).
    pub price: Option<ModelPrice>,
}

/// What an agent has spent, for `/context`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendReport {
    /// The current (or last) request.
    pub request: Spend,
    /// The agent since it started.
    pub agent: Spend,
    /// Its team, when it has a team budget.
    pub team: Option<Spend>,
}

#[derive(Debug, Default)]
struct Spent {
    request: Spend,
    agent: Spend,
}

/// Records an agent's spend and checks its budgets; clones share it.
#[derive(Debug, Clone, Default)]
pub struct SpendMeter {
    budget: AgentBudget,
    spent: Arc<Mutex<Spent>>,
}

impl SpendMeter {
    /// A meter for `budget`, nothing spent.
    pub fn new(budget: AgentBudget) -> Self {
        SpendMeter {
            budget,
            spent: Arc::default(),
        }
    }

    fn spent(&self) -> std::sync::MutexGuard<'_, Spent> {
        // A poisoned lock still holds valid sums: a panic cannot leave one half-added.
        self.spent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new request starts: its spend starts at zero.
    pub fn start_request(&self) {
        self.spent().request = Spend::default();
    }

    /// One model call (or a compaction's summarizer calls) spent `usage`.
    pub fn record(&self, usage: Usage) {
        let spend = Spend::of(usage, self.budget.price);
        {
            let mut spent = self.spent();
            spent.request.add(spend);
            spent.agent.add(spend);
        }
        if let Some(team) = &self.budget.team {
            team.record(spend);
        }
    }

    /// Whether another model call may start: the first budget (request, agent, team) whose
    /// spend has reached its limit, if any.
    ///
    /// # Errors
    /// [`BudgetExceeded`] naming the scope, its spend and its limit.
    pub fn check(&self) -> Result<(), BudgetExceeded> {
        let (request, agent) = {
            let spent = self.spent();
            (spent.request, spent.agent)
        };
        let team = self.budget.team.as_ref().map(|t| (t.spent(), t.limit()));
        let scopes = [
            Some((BudgetScope::Request, request, self.budget.request)),
            Some((BudgetScope::Agent, agent, self.budget.agent)),
            team.map(|(spent, limit)| (BudgetScope::Team, spent, limit)),
        ];
        match scopes
            .into_iter()
            .flatten()
            .find(|(_, spent, limit)| limit.reached_by(spent))
        {
            Some((scope, spent, limit)) => Err(BudgetExceeded {
                spent,
                limit,
                scope,
            }),
            None => Ok(()),
        }
    }

    /// What has been spent.
    pub fn report(&self) -> SpendReport {
        let spent = self.spent();
        SpendReport {
            request: spent.request,
            agent: spent.agent,
            team: self.budget.team.as_ref().map(TeamSpend::spent),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn usage(input_tokens: u64, output_tokens: u64) -> Usage {
        Usage {
            input_tokens,
            output_tokens,
            ..Default::default()
        }
    }

    #[test]
    fn the_first_scope_reached_is_named_and_requests_start_at_zero() {
        let team = TeamSpend::new(SpendLimit {
            input_tokens: Some(1_000),
            ..SpendLimit::default()
        });
        let budget = AgentBudget {
            request: SpendLimit {
                output_tokens: Some(100),
                ..SpendLimit::default()
            },
            team: Some(team.clone()),
            ..AgentBudget::default()
        };
        let meter = SpendMeter::new(budget.clone());
        let teammate = SpendMeter::new(budget);
        meter.record(usage(300, 100));
        let hit = meter.check().unwrap_err();
        assert_eq!(hit.scope, BudgetScope::Request);
        assert_eq!(hit.spent.output_tokens, 100);
        meter.start_request();
        meter.check().unwrap();
        // The teammate's spend counts against the shared team budget.
        teammate.record(usage(700, 10));
        let hit = meter.check().unwrap_err();
        assert_eq!(hit.scope, BudgetScope::Team);
        assert_eq!(hit.spent.input_tokens, 1_000);
        assert_eq!(meter.report().agent, Spend::of(usage(300, 100), None));
    }
}
