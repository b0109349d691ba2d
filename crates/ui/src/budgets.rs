//! Spend against budgets, and the rate limiters' waits: read when the page asks (the limiters
//! and the team's spend change without an event to say so).

use serde::Serialize;
use troupe_agents::LlmAgent;
use troupe_agents::spend::SpendReport;
use troupe_protocol::{BudgetExceeded, BudgetScope, Spend, SpendLimit};

use crate::source::Live;
use crate::view::View;

/// One agent's spend and the limits in force.
#[derive(Debug, Serialize)]
struct AgentSpend {
    agent: String,
    /// As its last `/context` said (between requests).
    spent: Option<SpendReport>,
    /// The team's, now.
    team_spent: Option<Spend>,
    request: Option<SpendLimit>,
    agent_limit: Option<SpendLimit>,
    team: Option<SpendLimit>,
    /// The budget that paused it, with the spend then.
    paused: Option<BudgetExceeded>,
}

/// One rate limiter's waits.
#[derive(Debug, Serialize)]
struct RateLimitLine {
    name: String,
    requests: u64,
    waited: u64,
    longest_wait_ms: u64,
    holds: u64,
}

/// What `/api/spend` answers.
#[derive(Debug, Serialize)]
pub(crate) struct SpendView {
    agents: Vec<AgentSpend>,
    rate_limits: Vec<RateLimitLine>,
}

/// The spend of every agent the team holds a budget of, and every limiter's waits.
pub(crate) fn spend(live: &Live, view: &View) -> SpendView {
    let agents = live
        .directory
        .names()
        .into_iter()
        .filter_map(|agent| {
            let budget = live.directory.agent::<LlmAgent>(&agent).budget()?;
            Some((agent, budget))
        })
        .map(|(agent, budget)| {
            let seen = view.agent(&agent);
            AgentSpend {
                agent,
                spent: seen.and_then(|a| a.spend()),
                team_spent: budget.team.as_ref().map(|t| t.spent()),
                request: budget.limit(BudgetScope::Request),
                agent_limit: budget.limit(BudgetScope::Agent),
                team: budget.limit(BudgetScope::Team),
                paused: seen.and_then(|a| a.paused()).cloned(),
            }
        })
        .collect();
    let rate_limits = live
        .rate_limits
        .iter()
        .map(|(name, model)| {
            let stats = model.stats();
            RateLimitLine {
                name: name.clone(),
                requests: stats.requests,
                waited: stats.waited,
                longest_wait_ms: stats.longest_wait.as_millis() as u64,
                holds: stats.holds,
            }
        })
        .collect();
    SpendView {
        agents,
        rate_limits,
    }
}
