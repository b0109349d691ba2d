//! One agent as the live view shows it: its state, context meter and marks, what it is doing and
//! what it said. The reducer (`view.rs`) folds the team's events into these.

use std::collections::VecDeque;

use serde::Serialize;
use troupe_agents::spend::SpendReport;
use troupe_compaction::ContextPolicy;
use troupe_protocol::BudgetExceeded;
use troupe_protocol::{CompactTrigger, CompactionMode};

/// The most characters of an agent's latest model answer kept (the rest scrolled off the front).
pub(crate) const SAID_CAP: usize = 32 * 1024;
/// Points of each agent's context meter kept.
const METER_POINTS: usize = 240;

/// What an agent is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// Between requests.
    Idle,
    /// Inside a request, between a model call and a tool call.
    Working,
    /// Waiting for its model's answer.
    CallingModel,
    /// Running a tool.
    RunningTool,
    /// A tool call waits for a person's answer.
    WaitingForApproval,
    /// Its budget is spent and its policy says pause.
    PausedByBudget,
    /// Waiting for a compaction of its conversation.
    Compacting,
    /// Stopped for good by the supervisor.
    Stopped,
}

/// The context meter's marks: fractions of the usable window (the window less the output
/// reserve), as the agent's context policy reads them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Marks {
    /// Where the context warning is raised.
    pub warning: f64,
    /// Where automatic compaction starts.
    pub trigger: f64,
    /// What compaction shrinks to.
    pub target: f64,
}

impl Default for Marks {
    fn default() -> Self {
        // The agents' own defaults, read from the one place they are set.
        let policy = ContextPolicy::for_window(1 << 16);
        Marks {
            warning: policy.warning,
            trigger: policy.trigger,
            target: policy.target,
        }
    }
}

/// One reading of an agent's context.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct MeterPoint {
    at_ms: u64,
    tokens: usize,
}

/// A compaction in progress.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Compacting {
    pub(crate) tokens: usize,
    pub(crate) trigger: CompactTrigger,
    pub(crate) mode: CompactionMode,
}

/// Where a node took the agent over from, as its last `AgentMoved` said.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Moved {
    /// The node it was on (as last seen), or `unknown`.
    pub(crate) from: String,
    /// The node it is on now.
    pub(crate) to: String,
    /// The last committed step of its log it went on from.
    pub(crate) step: usize,
}

/// One agent as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AgentView {
    pub(crate) name: String,
    pub(crate) state: AgentState,
    pub(crate) model: Option<String>,
    /// Tokens in the context at the last reading.
    pub(crate) tokens: Option<usize>,
    pub(crate) window: Option<usize>,
    pub(crate) output_reserve: usize,
    /// The agent's own marks, from its context policy (`None` until its `/context` answered:
    /// the page then draws the view's default marks).
    pub(crate) marks: Option<Marks>,
    pub(crate) meter: VecDeque<MeterPoint>,
    /// The tool running now.
    pub(crate) tool: Option<String>,
    /// The budget that paused it.
    pub(crate) paused: Option<BudgetExceeded>,
    pub(crate) compacting: Option<Compacting>,
    /// The text of its latest model answer (its last `SAID_CAP` characters).
    pub(crate) said: String,
    pub(crate) model_calls: u64,
    /// The last error its requests or model calls reported.
    pub(crate) error: Option<String>,
    /// Its last move to another node (a takeover after its node was lost).
    pub(crate) moved: Option<Moved>,
    /// What it spent, as its last `/context` said.
    pub(crate) spend: Option<SpendReport>,
    /// Counts its `/context` answers: each one is a moment between requests when its
    /// conversation may have changed (the page then reads it again, if it shows it).
    pub(crate) revision: u64,
    #[serde(skip)]
    pub(crate) in_request: bool,
    /// Whether it calls a model (so it answers `/context`).
    #[serde(skip)]
    pub(crate) llm: bool,
}

impl AgentView {
    pub(crate) fn new(name: &str) -> Self {
        AgentView {
            name: name.to_string(),
            state: AgentState::Idle,
            model: None,
            tokens: None,
            window: None,
            output_reserve: 0,
            marks: None,
            meter: VecDeque::new(),
            tool: None,
            paused: None,
            compacting: None,
            said: String::new(),
            model_calls: 0,
            error: None,
            moved: None,
            spend: None,
            revision: 0,
            in_request: false,
            llm: false,
        }
    }

    /// What it spent, as its last `/context` said.
    pub(crate) fn spend(&self) -> Option<SpendReport> {
        self.spend
    }

    /// The budget that paused it, while it waits.
    pub(crate) fn paused(&self) -> Option<&BudgetExceeded> {
        self.paused.as_ref()
    }

    pub(crate) fn read(&mut self, at_ms: u64, tokens: usize) {
        self.tokens = Some(tokens);
        if self.meter.len() == METER_POINTS {
            self.meter.pop_front();
        }
        self.meter.push_back(MeterPoint { at_ms, tokens });
    }

    /// Back to work, or idle when no request is open.
    pub(crate) fn resume(&mut self) {
        self.tool = None;
        self.state = if self.in_request {
            AgentState::Working
        } else {
            AgentState::Idle
        };
    }
}
