//! The view's state, folded from the team's events: one reducer, on the server. The page only
//! replaces what a patch names (and appends streamed text), so the two cannot disagree.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;
use troupe_agents::ContextStats;
use troupe_protocol::ApprovalId;
use troupe_protocol::{CompactTrigger, CompactionMode, CompactionReport, Event, EventRecord};

use crate::agent_view::{AgentState, AgentView, Compacting, Marks, Moved, SAID_CAP};
use crate::conversation::ConversationView;
use crate::waterfall::Traces;

/// Compactions kept.
const COMPACTIONS: usize = 500;
/// A tool call waiting for approval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ApprovalView {
    id: ApprovalId,
    agent: String,
    tool: String,
    /// The arguments exactly as the model wrote them.
    arguments: String,
    /// What the page shows, digested: an answer names it, and is refused when the call
    /// waiting under `id` is another.
    digest: String,
    at_ms: u64,
}

/// A finished compaction, and what its agent made of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CompactionView {
    /// Its place in the list (stable: the page updates it in place).
    n: u64,
    agent: String,
    at_ms: u64,
    trigger: Option<CompactTrigger>,
    report: Option<Box<CompactionReport>>,
    failed: Option<String>,
    applied: Option<bool>,
    waited_ms: Option<u64>,
    reason: Option<String>,
}

/// What changed: the page replaces each part it names.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Patch<'a> {
    version: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<&'a EventRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a AgentView>,
    /// Streamed text to append to `record`'s agent's `said`.
    #[serde(skip_serializing_if = "Option::is_none")]
    append: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approvals: Option<&'a [ApprovalView]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compaction: Option<&'a CompactionView>,
}

/// The whole view, for a viewer that starts or re-syncs.
#[derive(Debug, Serialize)]
pub(crate) struct Snapshot<'a> {
    version: u64,
    read_only: bool,
    marks: Marks,
    said_cap: usize,
    agents: Vec<&'a AgentView>,
    approvals: &'a [ApprovalView],
    compactions: &'a VecDeque<CompactionView>,
    events: &'a VecDeque<EventRecord>,
    /// Events the view missed (it fell behind the team's bus).
    missed: u64,
    conversation: Option<&'a ConversationView>,
}

/// The view's state.
#[derive(Debug)]
pub(crate) struct View {
    version: u64,
    read_only: bool,
    marks: Marks,
    history: usize,
    agents: BTreeMap<String, AgentView>,
    approvals: Vec<ApprovalView>,
    compactions: VecDeque<CompactionView>,
    compactions_seen: u64,
    events: VecDeque<EventRecord>,
    missed: u64,
    conversation: Option<ConversationView>,
    traces: Traces,
}

/// What a change touched, to build its patch from.
#[derive(Debug, Default)]
struct Touched {
    agent: bool,
    approvals: bool,
    compaction: bool,
}

impl View {
    pub(crate) fn new(marks: Marks, history: usize, read_only: bool) -> Self {
        View {
            version: 0,
            read_only,
            marks,
            history,
            agents: BTreeMap::new(),
            approvals: Vec::new(),
            compactions: VecDeque::new(),
            compactions_seen: 0,
            events: VecDeque::new(),
            missed: 0,
            conversation: None,
            traces: Traces::default(),
        }
    }

    /// A finished run's conversation, with its agent's model and context as the log left them.
    pub(crate) fn set_conversation(
        &mut self,
        conversation: ConversationView,
        model: Option<String>,
    ) -> Patch<'_> {
        let agent = self.agent_mut(&conversation.agent);
        agent.model = model;
        self.conversation = Some(conversation);
        self.version += 1;
        Patch {
            version: self.version,
            ..Patch::default()
        }
    }

    pub(crate) fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            version: self.version,
            read_only: self.read_only,
            marks: self.marks,
            said_cap: SAID_CAP,
            agents: self.agents.values().collect(),
            approvals: &self.approvals,
            compactions: &self.compactions,
            events: &self.events,
            missed: self.missed,
            conversation: self.conversation.as_ref(),
        }
    }

    /// The requests' traces.
    pub(crate) fn traces(&self) -> &Traces {
        &self.traces
    }

    /// The agent named so (added when first seen).
    pub(crate) fn agent(&self, name: &str) -> Option<&AgentView> {
        self.agents.get(name)
    }

    fn agent_mut(&mut self, name: &str) -> &mut AgentView {
        self.agents
            .entry(name.to_string())
            .or_insert_with(|| AgentView::new(name))
    }

    /// An agent of the team, known before it does anything.
    pub(crate) fn add_agent(&mut self, name: &str) -> Patch<'_> {
        self.agent_mut(name);
        self.version += 1;
        self.patch(
            Touched {
                agent: true,
                ..Touched::default()
            },
            name,
        )
    }

    /// Events the view never saw (the bus dropped them).
    pub(crate) fn missed(&mut self, n: u64) {
        self.missed += n;
        self.version += 1;
    }

    /// An approval answered through the view: it waits no more.
    pub(crate) fn answered(&mut self, id: &ApprovalId) -> Patch<'_> {
        let agent = self
            .approvals
            .iter()
            .find(|a| &a.id == id)
            .map(|a| a.agent.clone())
            .unwrap_or_default();
        self.approvals.retain(|a| &a.id != id);
        if let Some(view) = self.agents.get_mut(&agent)
            && view.state == AgentState::WaitingForApproval
            && !self.approvals.iter().any(|a| a.agent == agent)
        {
            view.resume();
        }
        self.version += 1;
        let touched = Touched {
            agent: self.agents.contains_key(&agent),
            approvals: true,
            compaction: false,
        };
        self.patch(touched, &agent)
    }

    /// What an LLM agent's `/context` answered.
    pub(crate) fn stats(&mut self, agent: &str, at_ms: u64, stats: &ContextStats) -> Patch<'_> {
        let view = self.agent_mut(agent);
        view.window = Some(stats.window);
        view.output_reserve = stats.output_reserve;
        view.marks = Some(Marks {
            warning: stats.warning,
            trigger: stats.trigger,
            target: stats.target,
        });
        view.spend = Some(stats.spend);
        view.revision += 1;
        view.read(at_ms, stats.tokens);
        self.version += 1;
        self.patch(
            Touched {
                agent: true,
                ..Touched::default()
            },
            agent,
        )
    }

    /// Fold one event in.
    pub(crate) fn apply(&mut self, record: EventRecord) -> Patch<'_> {
        let at = record.at_ms;
        let name = record.event.agent().to_string();
        let mut touched = Touched {
            agent: true,
            ..Touched::default()
        };
        let mut append = None;
        // The field itself, not `agent_mut`: the arms below touch the other fields too.
        let view = self
            .agents
            .entry(name.clone())
            .or_insert_with(|| AgentView::new(&name));
        match &record.event {
            Event::RequestStarted { .. } => {
                view.in_request = true;
                view.error = None;
                view.state = AgentState::Working;
            }
            Event::RequestFinished { error, .. } => {
                view.in_request = false;
                view.paused = None;
                view.error.clone_from(error);
                view.resume();
                touched.approvals = drop_approvals(&mut self.approvals, &name);
            }
            Event::ModelCallStarted { model, .. } => {
                view.llm = true;
                view.model = Some(model.clone());
                view.paused = None;
                view.said.clear();
                view.model_calls += 1;
                view.state = AgentState::CallingModel;
                // The turn went on, so every call it asked about was answered.
                touched.approvals = drop_approvals(&mut self.approvals, &name);
            }
            Event::ModelCallFinished {
                input_tokens,
                output_tokens,
                error,
                ..
            } => {
                view.read(at, (input_tokens + output_tokens) as usize);
                if error.is_some() {
                    view.error.clone_from(error);
                }
                view.resume();
            }
            Event::ModelDelta { text, .. } => {
                view.said.push_str(text);
                trim_front(&mut view.said, SAID_CAP);
                touched.agent = false;
                append = Some(());
            }
            Event::ToolCallStarted { tool, call_id, .. } => {
                view.state = AgentState::RunningTool;
                view.tool = Some(tool.clone());
                let before = self.approvals.len();
                // Any opening of this call: the event names the model's call id, and the
                // opening's number is the desk's.
                self.approvals.retain(|a| !a.id.is_of_call(&name, call_id));
                touched.approvals = self.approvals.len() != before;
            }
            Event::ToolCallFinished { .. } => view.resume(),
            Event::ContextWarning { tokens, window, .. } => {
                view.window = Some(*window);
                view.read(at, *tokens);
            }
            Event::CompactionStarted {
                tokens,
                trigger,
                mode,
                ..
            } => {
                if *mode == CompactionMode::Blocking {
                    view.state = AgentState::Compacting;
                }
                view.compacting = Some(Compacting {
                    tokens: *tokens,
                    trigger: *trigger,
                    mode: *mode,
                });
            }
            Event::CompactionProgress { tokens, .. } => view.read(at, *tokens),
            Event::CompactionFinished { report, .. } => {
                let trigger = view.compacting.as_ref().map(|c| c.trigger);
                view.window = Some(report.context_window);
                self.compactions_seen += 1;
                push_compaction(
                    &mut self.compactions,
                    CompactionView {
                        n: self.compactions_seen,
                        agent: name.clone(),
                        at_ms: at,
                        trigger,
                        report: Some(report.clone()),
                        failed: None,
                        applied: None,
                        waited_ms: None,
                        reason: None,
                    },
                );
                touched.compaction = true;
            }
            Event::CompactionFailed { reason, .. } => {
                let trigger = view.compacting.take().map(|c| c.trigger);
                if view.state == AgentState::Compacting {
                    view.resume();
                }
                self.compactions_seen += 1;
                push_compaction(
                    &mut self.compactions,
                    CompactionView {
                        n: self.compactions_seen,
                        agent: name.clone(),
                        at_ms: at,
                        trigger,
                        report: None,
                        failed: Some(reason.clone()),
                        applied: Some(false),
                        waited_ms: None,
                        reason: None,
                    },
                );
                touched.compaction = true;
            }
            Event::CompactionApplied {
                applied,
                waited_ms,
                reason,
                ..
            } => {
                view.compacting = None;
                if view.state == AgentState::Compacting {
                    view.resume();
                }
                if *applied
                    && let Some(report) = self
                        .compactions
                        .iter()
                        .rev()
                        .find(|c| c.agent == name)
                        .and_then(|c| c.report.as_ref())
                {
                    view.read(at, report.tokens_after);
                }
                if let Some(last) = self
                    .compactions
                    .iter_mut()
                    .rev()
                    .find(|c| c.agent == name && c.applied.is_none())
                {
                    last.applied = Some(*applied);
                    last.waited_ms = Some(*waited_ms);
                    last.reason.clone_from(reason);
                    touched.compaction = true;
                }
            }
            Event::ApprovalRequested {
                id,
                tool,
                arguments,
                ..
            } => {
                view.state = AgentState::WaitingForApproval;
                // Published again for the same call when a restarted agent resumes its turn.
                self.approvals.retain(|a| &a.id != id);
                self.approvals.push(ApprovalView {
                    id: id.clone(),
                    agent: name.clone(),
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    digest: crate::shown::digest(tool, arguments),
                    at_ms: at,
                });
                touched.approvals = true;
            }
            Event::BudgetPaused { exceeded, .. } => {
                view.state = AgentState::PausedByBudget;
                view.paused = Some(exceeded.clone());
            }
            Event::AgentRestarted { reason, .. } => {
                view.error = Some(reason.clone());
                view.in_request = false;
                view.resume();
            }
            Event::AgentStopped { reason, .. } => {
                view.error = Some(reason.clone());
                view.in_request = false;
                view.state = AgentState::Stopped;
            }
            Event::AgentMoved { from, to, step, .. } => {
                view.moved = Some(Moved {
                    from: from.clone(),
                    to: to.clone(),
                    step: *step,
                });
            }
            // A new kind of event: shown in the log, nothing else known about it.
            _ => touched.agent = false,
        }
        self.traces.apply(&record);
        if self.events.len() >= self.history.max(1) {
            self.events.pop_front();
        }
        self.events.push_back(record);
        self.version += 1;
        let text = append.and_then(|()| match self.events.back().map(|r| &r.event) {
            Some(Event::ModelDelta { text, .. }) => Some(text.as_str()),
            _ => None,
        });
        let record = self.events.back();
        let agent = touched.agent.then(|| self.agents.get(&name)).flatten();
        Patch {
            version: self.version,
            record,
            agent,
            append: text,
            approvals: touched.approvals.then_some(self.approvals.as_slice()),
            compaction: touched
                .compaction
                .then(|| self.compactions.back())
                .flatten(),
        }
    }

    fn patch(&self, touched: Touched, agent: &str) -> Patch<'_> {
        Patch {
            version: self.version,
            record: None,
            agent: touched.agent.then(|| self.agents.get(agent)).flatten(),
            append: None,
            approvals: touched.approvals.then_some(self.approvals.as_slice()),
            compaction: touched
                .compaction
                .then(|| self.compactions.back())
                .flatten(),
        }
    }
}

/// Drop `agent`'s waiting calls; whether there were any.
fn drop_approvals(approvals: &mut Vec<ApprovalView>, agent: &str) -> bool {
    let before = approvals.len();
    approvals.retain(|a| a.agent != agent);
    approvals.len() != before
}

fn push_compaction(list: &mut VecDeque<CompactionView>, c: CompactionView) {
    if list.len() == COMPACTIONS {
        list.pop_front();
    }
    list.push_back(c);
}

/// Keep the last `cap` bytes of `text`, cut at a character boundary.
fn trim_front(text: &mut String, cap: usize) {
    if text.len() > cap {
        let mut cut = text.len() - cap;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text.drain(..cut);
    }
}
