//! A request's trace as a waterfall: the spans its events stand for (agent → request → model
//! call, tool call, compaction), with their times and tokens, across every agent it asked (an
//! asked agent's request carries the asker's trace id). Folded from the same events as the rest
//! of the view, so a trace file opened read-only shows the same waterfall.

use std::collections::VecDeque;

use serde::Serialize;
use troupe_protocol::{Event, EventRecord, TraceId};

/// Traces kept (the newest).
const TRACES: usize = 200;
/// Spans kept of one trace (a runaway loop's are cut, not the view's memory).
const SPANS: usize = 5_000;

/// What a span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SpanKind {
    Request,
    ModelCall,
    ToolCall,
    Compaction,
}

/// One bar of a waterfall.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SpanView {
    kind: SpanKind,
    agent: String,
    /// The model, the tool, or the compaction's trigger.
    name: String,
    /// Nesting: a request is under the call that asked it, a call under its request.
    depth: u32,
    start_ms: u64,
    end_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<u64>,
    /// A compaction's tokens before and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens: Option<(usize, usize)>,
    /// How long the agent waited for a compaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    waited_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// A tool call's id, to find its end.
    #[serde(skip)]
    call_id: Option<String>,
}

impl SpanView {
    fn open(kind: SpanKind, agent: &str, name: String, depth: u32, at: u64) -> Self {
        SpanView {
            kind,
            agent: agent.to_string(),
            name,
            depth,
            start_ms: at,
            end_ms: None,
            input_tokens: None,
            output_tokens: None,
            tokens: None,
            waited_ms: None,
            error: None,
            call_id: None,
        }
    }
}

/// One trace's spans.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TraceView {
    id: String,
    #[serde(skip)]
    trace: TraceId,
    /// The agent it started in.
    agent: String,
    start_ms: u64,
    end_ms: u64,
    spans: Vec<SpanView>,
}

/// One line of the list of traces.
#[derive(Debug, Serialize)]
pub(crate) struct TraceLine<'a> {
    id: &'a str,
    agent: &'a str,
    start_ms: u64,
    ms: u64,
    spans: usize,
    agents: Vec<&'a str>,
    input_tokens: u64,
    output_tokens: u64,
    /// Whether a request of it is still open.
    open: bool,
}

impl TraceView {
    fn line(&self) -> TraceLine<'_> {
        let mut agents: Vec<&str> = Vec::new();
        for s in &self.spans {
            if !agents.contains(&s.agent.as_str()) {
                agents.push(&s.agent);
            }
        }
        TraceLine {
            id: &self.id,
            agent: &self.agent,
            start_ms: self.start_ms,
            ms: self.end_ms.saturating_sub(self.start_ms),
            spans: self.spans.len(),
            agents,
            input_tokens: self.spans.iter().filter_map(|s| s.input_tokens).sum(),
            output_tokens: self.spans.iter().filter_map(|s| s.output_tokens).sum(),
            open: self
                .spans
                .iter()
                .any(|s| s.kind == SpanKind::Request && s.end_ms.is_none()),
        }
    }

    /// The open span of `agent` of `kind` that `pick` accepts, newest first.
    fn open_span(
        &mut self,
        agent: &str,
        kind: SpanKind,
        pick: impl Fn(&SpanView) -> bool,
    ) -> Option<&mut SpanView> {
        self.spans
            .iter_mut()
            .rev()
            .find(|s| s.kind == kind && s.agent == agent && s.end_ms.is_none() && pick(s))
    }

    /// Where a call of `agent` nests: under its open request.
    fn call_depth(&self, agent: &str) -> u32 {
        self.spans
            .iter()
            .rev()
            .find(|s| s.kind == SpanKind::Request && s.agent == agent && s.end_ms.is_none())
            .map_or(0, |r| r.depth + 1)
    }

    fn push(&mut self, span: SpanView) {
        if self.spans.len() < SPANS {
            self.spans.push(span);
        }
    }

    fn apply(&mut self, at: u64, event: &Event) {
        self.end_ms = self.end_ms.max(at);
        let agent = event.agent();
        match event {
            Event::RequestStarted { .. } => {
                // An asked agent's request nests under the call that is waiting for it: one
                // deeper than the deepest call still open.
                let depth = self
                    .spans
                    .iter()
                    .filter(|s| s.end_ms.is_none() && s.kind != SpanKind::Request)
                    .map(|s| s.depth + 1)
                    .max()
                    .unwrap_or(0);
                self.push(SpanView::open(
                    SpanKind::Request,
                    agent,
                    agent.to_string(),
                    depth,
                    at,
                ));
            }
            Event::RequestFinished { error, .. } => {
                if let Some(s) = self.open_span(agent, SpanKind::Request, |_| true) {
                    s.end_ms = Some(at);
                    s.error.clone_from(error);
                }
            }
            Event::ModelCallStarted { model, .. } => {
                let depth = self.call_depth(agent);
                self.push(SpanView::open(
                    SpanKind::ModelCall,
                    agent,
                    model.clone(),
                    depth,
                    at,
                ));
            }
            Event::ModelCallFinished {
                input_tokens,
                output_tokens,
                error,
                ..
            } => {
                if let Some(s) = self.open_span(agent, SpanKind::ModelCall, |_| true) {
                    s.end_ms = Some(at);
                    s.input_tokens = Some(*input_tokens);
                    s.output_tokens = Some(*output_tokens);
                    s.error.clone_from(error);
                }
            }
            Event::ToolCallStarted { tool, call_id, .. } => {
                let depth = self.call_depth(agent);
                let mut span = SpanView::open(SpanKind::ToolCall, agent, tool.clone(), depth, at);
                span.call_id = Some(call_id.clone());
                self.push(span);
            }
            Event::ToolCallFinished {
                call_id, is_error, ..
            } => {
                let id = Some(call_id.clone());
                if let Some(s) = self.open_span(agent, SpanKind::ToolCall, |s| s.call_id == id) {
                    s.end_ms = Some(at);
                    if *is_error {
                        s.error = Some("the tool failed".to_string());
                    }
                }
            }
            Event::CompactionStarted {
                tokens, trigger, ..
            } => {
                let depth = self.call_depth(agent);
                let mut span = SpanView::open(
                    SpanKind::Compaction,
                    agent,
                    trigger.as_str().to_string(),
                    depth,
                    at,
                );
                span.tokens = Some((*tokens, *tokens));
                self.push(span);
            }
            Event::CompactionFinished { report, .. } => {
                if let Some(s) = self.open_span(agent, SpanKind::Compaction, |_| true) {
                    s.end_ms = Some(at);
                    s.tokens = Some((report.tokens_before, report.tokens_after));
                }
            }
            Event::CompactionFailed { reason, .. } => {
                if let Some(s) = self.open_span(agent, SpanKind::Compaction, |_| true) {
                    s.end_ms = Some(at);
                    s.error = Some(reason.clone());
                }
            }
            Event::CompactionApplied { waited_ms, .. } => {
                if let Some(s) = self
                    .spans
                    .iter_mut()
                    .rev()
                    .find(|s| s.kind == SpanKind::Compaction && s.agent == agent)
                {
                    s.waited_ms = Some(*waited_ms);
                }
            }
            _ => {}
        }
    }
}

/// The newest traces.
#[derive(Debug, Default)]
pub(crate) struct Traces {
    list: VecDeque<TraceView>,
}

impl Traces {
    /// Fold one event in (events outside any trace draw nothing).
    pub(crate) fn apply(&mut self, record: &EventRecord) {
        let Some(trace) = record.trace_id else {
            return;
        };
        if !matters(&record.event) {
            return;
        }
        let at = record.at_ms;
        // The newest traces are at the back, and an event almost always belongs to one of them.
        let found = self.list.iter().rposition(|t| t.trace == trace);
        let index = match found {
            Some(i) => i,
            None => {
                if self.list.len() == TRACES {
                    self.list.pop_front();
                }
                self.list.push_back(TraceView {
                    id: trace.to_string(),
                    trace,
                    agent: record.event.agent().to_string(),
                    start_ms: at,
                    end_ms: at,
                    spans: Vec::new(),
                });
                self.list.len() - 1
            }
        };
        if let Some(view) = self.list.get_mut(index) {
            view.apply(at, &record.event);
        }
    }

    /// The list, newest first.
    pub(crate) fn lines(&self) -> Vec<TraceLine<'_>> {
        self.list.iter().rev().map(TraceView::line).collect()
    }

    /// One trace by its id.
    pub(crate) fn get(&self, id: &str) -> Option<&TraceView> {
        self.list.iter().rev().find(|t| t.id == id)
    }
}

/// Whether an event draws a bar (streamed text, warnings and the like do not).
fn matters(event: &Event) -> bool {
    matches!(
        event,
        Event::RequestStarted { .. }
            | Event::RequestFinished { .. }
            | Event::ModelCallStarted { .. }
            | Event::ModelCallFinished { .. }
            | Event::ToolCallStarted { .. }
            | Event::ToolCallFinished { .. }
            | Event::CompactionStarted { .. }
            | Event::CompactionFinished { .. }
            | Event::CompactionFailed { .. }
            | Event::CompactionApplied { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at_ms: u64, trace: TraceId, event: Event) -> EventRecord {
        EventRecord {
            seq: at_ms,
            at_ms,
            trace_id: Some(trace),
            event,
        }
    }

    #[test]
    fn an_asked_agent_nests_under_the_call_that_asked_it() {
        let trace: TraceId = "0af7651916cd43dd8448eb211c80319c".parse().unwrap();
        let mut traces = Traces::default();
        let events = [
            Event::RequestStarted {
                agent: "lead".into(),
            },
            Event::ToolCallStarted {
                agent: "lead".into(),
                tool: "ask_agent".into(),
                call_id: "c1".into(),
            },
            Event::RequestStarted {
                agent: "coder".into(),
            },
            Event::ModelCallStarted {
                agent: "coder".into(),
                model: "m".into(),
                messages: 2,
            },
            Event::ModelCallFinished {
                agent: "coder".into(),
                model: "m".into(),
                input_tokens: 100,
                output_tokens: 7,
                ms: 5,
                error: None,
            },
            Event::RequestFinished {
                agent: "coder".into(),
                error: None,
            },
            Event::ToolCallFinished {
                agent: "lead".into(),
                tool: "ask_agent".into(),
                call_id: "c1".into(),
                is_error: false,
                ms: 9,
            },
            Event::RequestFinished {
                agent: "lead".into(),
                error: None,
            },
        ];
        for (i, e) in events.into_iter().enumerate() {
            traces.apply(&at(1_000 + i as u64, trace, e));
        }
        let view = traces.get(&trace.to_string()).unwrap();
        let bars: Vec<(SpanKind, &str, u32, Option<u64>)> = view
            .spans
            .iter()
            .map(|s| (s.kind, s.agent.as_str(), s.depth, s.end_ms))
            .collect();
        assert_eq!(
            bars,
            [
                (SpanKind::Request, "lead", 0, Some(1_007)),
                (SpanKind::ToolCall, "lead", 1, Some(1_006)),
                (SpanKind::Request, "coder", 2, Some(1_005)),
                (SpanKind::ModelCall, "coder", 3, Some(1_004)),
            ]
        );
        assert_eq!(view.spans[3].input_tokens, Some(100));
        let line = &traces.lines()[0];
        assert_eq!(line.agents, ["lead", "coder"]);
        assert_eq!((line.ms, line.output_tokens, line.open), (7, 7, false));
    }
}
