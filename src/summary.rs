//! A per-agent summary of a run, computed from the event stream.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use troupe_protocol::{Event, EventRecord, TraceId};

/// What one agent did during a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentTotals {
    /// Requests handled.
    pub requests: u32,
    /// Model calls made.
    pub model_calls: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tool calls whose result reported an error.
    pub tool_errors: u32,
    /// Prompt tokens over all model calls.
    pub input_tokens: u64,
    /// Generated tokens over all model calls.
    pub output_tokens: u64,
    /// Milliseconds spent in model calls.
    pub model_ms: u64,
    /// Restarts by the supervisor.
    pub restarts: u32,
    /// Compactions finished.
    pub compactions: u32,
}

/// Totals per agent and the traces seen, built by feeding [`EventRecord`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Per agent, by name.
    pub agents: BTreeMap<String, AgentTotals>,
    /// Distinct trace ids.
    pub traces: BTreeSet<TraceId>,
    /// Events seen.
    pub events: u64,
}

impl RunSummary {
    /// Account for one event.
    pub fn record(&mut self, record: &EventRecord) {
        self.events += 1;
        if let Some(trace) = record.trace_id {
            self.traces.insert(trace);
        }
        let totals = self
            .agents
            .entry(record.event.agent().to_string())
            .or_default();
        match &record.event {
            Event::RequestStarted { .. } => totals.requests += 1,
            Event::ModelCallFinished {
                input_tokens,
                output_tokens,
                ms,
                ..
            } => {
                totals.model_calls += 1;
                // Saturating: the counts are what providers reported.
                totals.input_tokens = totals.input_tokens.saturating_add(*input_tokens);
                totals.output_tokens = totals.output_tokens.saturating_add(*output_tokens);
                totals.model_ms += ms;
            }
            Event::ToolCallFinished { is_error, .. } => {
                totals.tool_calls += 1;
                totals.tool_errors += u32::from(*is_error);
            }
            Event::AgentRestarted { .. } => totals.restarts += 1,
            Event::CompactionFinished { .. } => totals.compactions += 1,
            _ => {}
        }
    }
}

impl fmt::Display for RunSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<14} {:>8} {:>11} {:>10} {:>9} {:>10} {:>9}",
            "agent", "requests", "model calls", "tool calls", "tokens in", "tokens out", "model ms"
        )?;
        for (name, t) in &self.agents {
            writeln!(
                f,
                "{:<14} {:>8} {:>11} {:>10} {:>9} {:>10} {:>9}",
                name,
                t.requests,
                t.model_calls,
                if t.tool_errors > 0 {
                    format!("{} ({} err)", t.tool_calls, t.tool_errors)
                } else {
                    t.tool_calls.to_string()
                },
                t.input_tokens,
                t.output_tokens,
                t.model_ms
            )?;
        }
        write!(
            f,
            "{} events in {} trace(s)",
            self.events,
            self.traces.len()
        )
    }
}
