//! An agent's budgets and the meter that enforces them (see [`troupe_runtime::budget`]).
//!
//! The meter is shared between the agent, which records every model call it makes and checks
//! the budgets before the next one, and the compression agent, whose summarizer model records
//! each call it makes for the agent the same way (`traced.rs`; a compressor on another
//! node is out of reach, so the compaction client records its report's counts instead):
//! compaction calls count against the request, the agent and the team like any other call.
//!
//! What happens once a budget is spent is the budget's [`OnExceeded`]: the request ends, or it
//! pauses until a limit is raised ([`AgentBudget::raise`], [`TeamSpend::set_limit`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use troupe_protocol::Usage;
use troupe_protocol::{BudgetExceeded, BudgetScope, ModelPrice, Spend, SpendLimit};
use troupe_runtime::Directory;
use troupe_runtime::budget::TeamSpend;

/// How long a paused request waits for a raised limit by default before it ends: under the
/// team's default ask timeout (300 s), like an approval's, so the caller hears
/// [`BudgetExceeded`] before it gives up on the request.
pub const DEFAULT_PAUSE_TIMEOUT: Duration = Duration::from_secs(240);

/// What a request does once one of its budgets is spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnExceeded {
    /// End with [`BudgetExceeded`], keeping what the request added.
    #[default]
    End,
    /// Before the next model call, publish
    /// [`Event::BudgetPaused`](troupe_protocol::Event::BudgetPaused) and wait until the limit is
    /// raised, then go on; after `timeout` (or once the caller stops listening) end as with
    /// [`OnExceeded::End`].
    Pause {
        /// How long to wait for a raised limit.
        timeout: Duration,
    },
}

impl OnExceeded {
    /// Pause, with the default timeout ([`DEFAULT_PAUSE_TIMEOUT`]).
    pub fn pause() -> Self {
        OnExceeded::Pause {
            timeout: DEFAULT_PAUSE_TIMEOUT,
        }
    }
}

/// The request and agent limits as raised while the agent runs (`None`: the budget's own);
/// clones share them.
#[derive(Debug, Clone, Default)]
pub struct RaisedLimits(watch::Sender<Raised>);

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Raised {
    request: Option<SpendLimit>,
    agent: Option<SpendLimit>,
}

/// An agent's budgets: per request, for the agent as a whole (since it started), and the
/// team's (shared by every agent given a clone of the same [`TeamSpend`]); with the prices of
/// its model, which cost limits need.
///
/// ```
/// use troupe_agents::spend::AgentBudget;
/// use troupe_protocol::SpendLimit;
/// use troupe_runtime::budget::TeamSpend;
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
    /// What a request does once a budget is spent: end (the default) or pause.
    pub on_exceeded: OnExceeded,
    /// Limits raised since the agent started ([`AgentBudget::raise`]); shared by this budget's
    /// clones, so the one the agent was given and the one its builder kept are the same.
    pub raised: RaisedLimits,
}

/// There is no team budget to raise.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the agent has no team budget to raise")]
pub struct NoTeamBudget;

impl AgentBudget {
    /// Replace the limit of `scope` from now on (raise it, say, to let a paused request go on):
    /// the request limit holds for this and every later request, the team's for every agent
    /// sharing it ([`TeamSpend::set_limit`]). Agents given a clone of this budget see it at
    /// their next check.
    ///
    /// # Errors
    /// [`NoTeamBudget`] for [`BudgetScope::Team`] without a team budget.
    pub fn raise(&self, scope: BudgetScope, limit: SpendLimit) -> Result<(), NoTeamBudget> {
        match scope {
            BudgetScope::Request => self.raised.0.send_modify(|r| r.request = Some(limit)),
            BudgetScope::Agent => self.raised.0.send_modify(|r| r.agent = Some(limit)),
            BudgetScope::Team => self.team.as_ref().ok_or(NoTeamBudget)?.set_limit(limit),
        }
        Ok(())
    }

    /// The limit of `scope` in force now: as last raised ([`AgentBudget::raise`]), else the
    /// budget's own; `None` for the team's when there is no team budget.
    pub fn limit(&self, scope: BudgetScope) -> Option<SpendLimit> {
        let raised = *self.raised.0.borrow();
        match scope {
            BudgetScope::Request => Some(raised.request.unwrap_or(self.request)),
            BudgetScope::Agent => Some(raised.agent.unwrap_or(self.agent)),
            BudgetScope::Team => self.team.as_ref().map(TeamSpend::limit),
        }
    }
}

/// The budgets of a team's LLM agents by name (a directory extension: one per team), put there
/// when [`crate::spawn_agent`] or [`crate::TeamBuilder`] spawns an agent: a paused agent waits
/// inside its request, so a holder of the team's directory (the live view) reads the budget to
/// raise here ([`crate::LlmAgentHandle::budget`]), not from the agent.
#[derive(Debug, Default)]
pub(crate) struct TeamBudgets(Mutex<HashMap<String, AgentBudget>>);

impl TeamBudgets {
    pub(crate) fn of(directory: &Directory) -> Arc<TeamBudgets> {
        directory.extension(TeamBudgets::default)
    }

    /// `agent` was spawned with `budget` (a clone: raises reach the agent's).
    pub(crate) fn put(&self, agent: &str, budget: &AgentBudget) {
        troupe_protocol::sync::lock(&self.0).insert(agent.to_string(), budget.clone());
    }

    /// The budget `agent` was spawned with, shared with it.
    pub(crate) fn get(&self, agent: &str) -> Option<AgentBudget> {
        troupe_protocol::sync::lock(&self.0).get(agent).cloned()
    }
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

    /// Whether the model has a price (without one every cost is 0).
    pub fn is_priced(&self) -> bool {
        self.budget.price.is_some()
    }

    /// One model call (or a compaction's summarizer calls) spent `usage`: what that is, priced.
    pub fn record(&self, usage: Usage) -> Spend {
        let spend = Spend::of(usage, self.budget.price);
        {
            let mut spent = self.spent();
            spent.request.add(spend);
            spent.agent.add(spend);
        }
        if let Some(team) = &self.budget.team {
            team.record(spend);
        }
        spend
    }

    /// Whether another model call may start: the first budget (request, agent, team) whose
    /// spend has reached its limit, if any.
    ///
    /// # Errors
    /// [`BudgetExceeded`] naming the scope, its spend and its limit.
    pub fn check(&self) -> Result<(), BudgetExceeded> {
        match self.spent_scopes().next() {
            Some(hit) => Err(hit),
            None => Ok(()),
        }
    }

    /// Every budget whose spend has reached its limit, in the order request, agent, team.
    fn spent_scopes(&self) -> impl Iterator<Item = BudgetExceeded> {
        let (request, agent) = {
            let spent = self.spent();
            (spent.request, spent.agent)
        };
        let team = self.budget.team.as_ref().map(TeamSpend::spent);
        let scopes = [
            (BudgetScope::Request, Some(request)),
            (BudgetScope::Agent, Some(agent)),
            (BudgetScope::Team, team),
        ];
        scopes
            .into_iter()
            .filter_map(|(scope, spent)| Some((scope, spent?, self.budget.limit(scope)?)))
            .filter(|(_, spent, limit)| limit.reached_by(spent))
            .map(|(scope, spent, limit)| BudgetExceeded {
                spent,
                limit,
                scope,
            })
    }

    /// What the budget says to do once one is spent.
    pub fn on_exceeded(&self) -> OnExceeded {
        self.budget.on_exceeded
    }

    /// Wait until the budget of `scope` is spent no more — its limit was raised (or changed)
    /// past its spend — checking again after every change; `Err` with it still spent after
    /// `timeout`. Another budget may still be spent then: the caller checks again and pauses
    /// on that one in turn, so each is asked about rather than waited on in silence.
    /// Cancel-safe: dropping it waits no more and changes nothing.
    ///
    /// # Errors
    /// [`BudgetExceeded`] for `scope`, as it stands at the end.
    pub async fn wait_for_raise(
        &self,
        scope: BudgetScope,
        timeout: Duration,
    ) -> Result<(), BudgetExceeded> {
        // Subscribed before each check: a raise between the check and the wait is not missed.
        let mut own = self.budget.raised.0.subscribe();
        let mut team = self.budget.team.as_ref().map(TeamSpend::watch_limit);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let Some(hit) = self.spent_scopes().find(|hit| hit.scope == scope) else {
                return Ok(());
            };
            let team_changed = async {
                match team.as_mut() {
                    // A dropped sender cannot be: this meter's budget holds a clone of it.
                    Some(team) => team.changed().await.unwrap_or(()),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = own.changed() => {}
                () = team_changed => {}
                () = tokio::time::sleep_until(deadline) => return Err(hit),
            }
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
