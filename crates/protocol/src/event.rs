//! The event stream: everything observable that agents do (the runtime's bus carries it).
//!
//! The CLI's progress display, trace files and tests all read the same stream.

use serde::{Deserialize, Serialize};

use crate::compaction_report::{CompactTrigger, CompactionReport};
use crate::trace_id::TraceId;

/// Something an agent or the supervisor did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// An agent began handling a request (published by the actor that runs its behaviour, so
    /// every behaviour has it). A request holds any number of turns: model calls with their
    /// tool calls.
    RequestStarted {
        /// The name of the agent it happened in.
        agent: String,
    },
    /// An agent is about to call its model.
    ModelCallStarted {
        /// The name of the agent it happened in.
        agent: String,
        /// The model's name.
        model: String,
        /// Messages sent.
        messages: usize,
    },
    /// A model call returned.
    ModelCallFinished {
        /// The name of the agent it happened in.
        agent: String,
        /// The model's name.
        model: String,
        /// Prompt tokens.
        input_tokens: u64,
        /// Generated tokens.
        output_tokens: u64,
        /// Wall time in milliseconds.
        ms: u64,
        /// The error, if the call failed.
        error: Option<String>,
    },
    /// A tool call began.
    ToolCallStarted {
        /// The name of the agent it happened in.
        agent: String,
        /// The tool's name.
        tool: String,
        /// The call's id.
        call_id: String,
    },
    /// A tool call finished.
    ToolCallFinished {
        /// The name of the agent it happened in.
        agent: String,
        /// The tool's name.
        tool: String,
        /// The call's id.
        call_id: String,
        /// Whether the tool result reports an error to the model.
        is_error: bool,
        /// Wall time in milliseconds.
        ms: u64,
    },
    /// An agent finished handling a request (published by the actor, before the caller has the
    /// answer). Its model calls are the [`Event::ModelCallFinished`]s under the same trace.
    RequestFinished {
        /// The name of the agent it happened in.
        agent: String,
        /// The error, if the request failed.
        error: Option<String>,
    },
    /// A request a restart left in flight was finished from its session log's last committed
    /// step (durable steps): its caller is gone, so its answer is told here (and kept in the
    /// log).
    RequestResumed {
        /// The name of the agent it happened in.
        agent: String,
        /// The final answer, when the request was answered.
        answer: Option<String>,
        /// The error, if the request failed.
        error: Option<String>,
    },
    /// The agent's context passed the warning threshold.
    ContextWarning {
        /// The name of the agent it happened in.
        agent: String,
        /// Tokens in the conversation.
        tokens: usize,
        /// The context window.
        window: usize,
    },
    /// Text a model generated for an agent, as it was generated (streamed answers). The deltas
    /// of one model call, concatenated, are its answer's text.
    ModelDelta {
        /// The agent whose model call it is.
        agent: String,
        /// The new text (whole UTF-8 characters).
        text: String,
    },
    /// Compaction of an agent's conversation began.
    CompactionStarted {
        /// The agent whose conversation is compacted.
        agent: String,
        /// Tokens before.
        tokens: usize,
        /// What started it (serialized as its name: `manual`, `automatic`, `agent_tool`,
        /// `emergency`).
        trigger: CompactTrigger,
        /// Whether the agent goes on working meanwhile (`background`) or waits for it
        /// (`blocking`).
        mode: CompactionMode,
    },
    /// One iteration of the compression agent.
    CompactionProgress {
        /// The agent whose conversation is compacted.
        agent: String,
        /// Iteration number, from 1.
        iteration: u32,
        /// Tokens now.
        tokens: usize,
    },
    /// Compaction finished.
    CompactionFinished {
        /// The agent whose conversation is compacted.
        agent: String,
        /// The compaction report (boxed: it is by far the largest event).
        report: Box<CompactionReport>,
        /// The mode it started in: an agent has at most one compaction of each mode at a time
        /// (a background job may finish while the agent makes room at its limit), so the mode
        /// says which one finished.
        mode: CompactionMode,
    },
    /// Compaction failed; the conversation is unchanged.
    CompactionFailed {
        /// The agent whose conversation is compacted.
        agent: String,
        /// The compaction error's message (the conversation is unchanged).
        reason: String,
        /// The mode it started in (see `CompactionFinished`).
        mode: CompactionMode,
    },
    /// An agent applied a compaction's answer to its conversation (`applied: true`), or dropped
    /// it (`applied: false`, `reason` says why: stale, superseded, failed). Published by the
    /// agent, after the compaction's `CompactionFinished` or `CompactionFailed` of the same
    /// mode — except for a background compaction dropped as stale while it still ran, whose
    /// `CompactionFailed` (cancelled) follows.
    CompactionApplied {
        /// The agent whose conversation was compacted.
        agent: String,
        /// Whether the agent went on working while the compaction ran.
        mode: CompactionMode,
        /// How long the agent's request was held up by this compaction, in milliseconds:
        /// blocking, from the ask to the applied result; background, the time spent waiting
        /// for it at the trigger plus the splice itself (about 0 when it landed on its own).
        waited_ms: u64,
        /// Whether the conversation now holds the compacted prefix.
        applied: bool,
        /// Why the answer was dropped, when it was.
        reason: Option<String>,
    },
    /// A tool call waits for a person's answer (its agent's approval policy says "ask"):
    /// answer with the runtime's `Team::approve`, `Team::approve_with` or `Team::deny`.
    /// Published again for the same call when a restarted agent resumes the paused turn.
    ApprovalRequested {
        /// Names the call in the answer.
        id: crate::ApprovalId,
        /// The agent whose model asked for the call.
        agent: String,
        /// The tool's name.
        tool: String,
        /// The call's arguments as the model wrote them (JSON).
        arguments: String,
    },
    /// An agent's budget is spent and its policy says pause (`troupe_agents`'
    /// `OnExceeded::Pause`): before its next model call the agent waits until the limit is
    /// raised (the runtime's `TeamSpend::set_limit` for the team's, the agent's `AgentBudget::raise` for its
    /// own), then goes on; when the pause times out or the caller stops listening, the request
    /// ends with the same [`BudgetExceeded`] and keeps what it added.
    ///
    /// [`BudgetExceeded`]: crate::BudgetExceeded
    BudgetPaused {
        /// The agent that waits.
        agent: String,
        /// Which budget is spent, its spend and its limit.
        exceeded: crate::BudgetExceeded,
    },
    /// The supervisor restarted a failed agent.
    AgentRestarted {
        /// The name of the agent it happened in.
        agent: String,
        /// Restarts within the current window, this one included.
        restarts: u32,
        /// Why it failed.
        reason: String,
    },
    /// An agent failed too often and was stopped for good.
    AgentStopped {
        /// The name of the agent it happened in.
        agent: String,
        /// The last failure, and that the restart limit was reached (or the restart failed).
        reason: String,
    },
    /// A node took an agent over from a node that was lost (its lease ran out): the agent
    /// started here from its log in the shared store, and resumes the request it had in flight.
    AgentMoved {
        /// The agent.
        agent: String,
        /// The node it was on (as last seen), or `unknown`.
        from: String,
        /// The node it is on now.
        to: String,
        /// The last committed step of its log it goes on from.
        step: usize,
    },
}

impl Event {
    /// The agent this event is about.
    pub fn agent(&self) -> &str {
        match self {
            Event::RequestStarted { agent }
            | Event::ModelCallStarted { agent, .. }
            | Event::ModelCallFinished { agent, .. }
            | Event::ModelDelta { agent, .. }
            | Event::ToolCallStarted { agent, .. }
            | Event::ToolCallFinished { agent, .. }
            | Event::RequestFinished { agent, .. }
            | Event::RequestResumed { agent, .. }
            | Event::ContextWarning { agent, .. }
            | Event::CompactionStarted { agent, .. }
            | Event::CompactionProgress { agent, .. }
            | Event::CompactionFinished { agent, .. }
            | Event::CompactionFailed { agent, .. }
            | Event::CompactionApplied { agent, .. }
            | Event::ApprovalRequested { agent, .. }
            | Event::BudgetPaused { agent, .. }
            | Event::AgentRestarted { agent, .. }
            | Event::AgentStopped { agent, .. }
            | Event::AgentMoved { agent, .. } => agent,
        }
    }
}

/// How a compaction relates to the work of the agent it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionMode {
    /// Started ahead of the limit from a snapshot of the conversation; the agent goes on and
    /// splices the answer in at a later turn boundary.
    Background,
    /// The agent waits for it (the trigger with no background job, `/compact`, the `compact`
    /// tool, the emergency before a model call).
    Blocking,
}

/// An event with its place in the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Position in the bus's total order (from 1).
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The trace this event belongs to, when there is one (serialized as 32 hex digits).
    pub trace_id: Option<TraceId>,
    /// The event.
    pub event: Event,
}
