//! Spans arranged as trees, one per trace.
//!
//! Parents come from `parent_span_id`, within one trace. Should an agent asked by another agent
//! have lost its parent (spans propagate through actor messages only when the runtime carries
//! them), its `invoke_agent` span is placed under the asking agent's `ask_agent` tool call of the
//! same trace that was running when it started.

use std::collections::{BTreeMap, HashMap};

use crate::telemetry::jsonl::{EventLine, SpanLine, TraceLine};

/// A span with its children, ordered by start time.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanNode {
    /// The span.
    pub span: SpanLine,
    /// Its children.
    pub children: Vec<SpanNode>,
}

/// One trace: its root spans (usually one) and warnings logged outside any span.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceTree {
    /// 32 hex digits.
    pub trace_id: String,
    /// Root spans by start time.
    pub roots: Vec<SpanNode>,
}

/// Every trace of a file, in order of first start, plus events outside any span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceForest {
    /// The traces.
    pub traces: Vec<TraceTree>,
    /// Warnings and errors logged outside any span.
    pub loose_events: Vec<EventLine>,
}

impl SpanNode {
    /// This node and every node below it, depth first.
    pub fn walk(&self) -> Vec<&SpanNode> {
        let mut out = vec![self];
        for child in &self.children {
            out.extend(child.walk());
        }
        out
    }

    /// An attribute as a string (numbers rendered as JSON).
    pub fn attr(&self, name: &str) -> Option<String> {
        self.span.attributes.get(name).map(|v| match v.as_str() {
            Some(s) => s.to_string(),
            None => v.to_string(),
        })
    }

    /// An attribute as a number.
    pub fn attr_u64(&self, name: &str) -> Option<u64> {
        self.span
            .attributes
            .get(name)
            .and_then(serde_json::Value::as_u64)
    }
}

/// Where an agent invocation without a parent should hang: the asking agent's `ask_agent` call
/// of the same trace whose time range contains the invocation's start (the latest such).
fn asking_call(spans: &[SpanLine], orphan: &SpanLine) -> Option<String> {
    let from = orphan.attributes.get("troupe.from")?.as_str()?;
    spans
        .iter()
        .filter(|s| {
            s.trace_id == orphan.trace_id
                && s.name == "execute_tool"
                && s.attributes
                    .get("gen_ai.tool.name")
                    .and_then(|v| v.as_str())
                    == Some("ask_agent")
                && s.attributes
                    .get("gen_ai.agent.name")
                    .and_then(|v| v.as_str())
                    == Some(from)
                && s.start_time_unix_nano <= orphan.start_time_unix_nano
                && s.end_time_unix_nano >= orphan.end_time_unix_nano
        })
        .max_by_key(|s| s.start_time_unix_nano)
        .map(|s| s.span_id.clone())
}

/// Arrange the records of a trace file as trees.
pub fn build_forest(lines: &[TraceLine]) -> TraceForest {
    let mut spans = Vec::new();
    let mut loose_events = Vec::new();
    for line in lines {
        match line {
            TraceLine::Span(s) => spans.push(s.clone()),
            TraceLine::Event(e) => loose_events.push(e.clone()),
        }
    }
    // A parent in another trace (an actor's task span around a request that starts a trace of
    // its own) does not nest: the request is the root of its trace.
    let trace_of: HashMap<&str, &str> = spans
        .iter()
        .map(|s| (s.span_id.as_str(), s.trace_id.as_str()))
        .collect();
    let mut parent_of: HashMap<String, Option<String>> = HashMap::new();
    for s in &spans {
        let parent = match &s.parent_span_id {
            Some(p) if trace_of.get(p.as_str()) == Some(&s.trace_id.as_str()) => Some(p.clone()),
            _ if s.name == "invoke_agent" => asking_call(&spans, s),
            _ => None,
        };
        parent_of.insert(s.span_id.clone(), parent);
    }
    let mut children: HashMap<Option<String>, Vec<SpanLine>> = HashMap::new();
    for s in spans {
        let parent = parent_of.get(&s.span_id).cloned().flatten();
        children.entry(parent).or_default().push(s);
    }
    fn attach(span: SpanLine, children: &mut HashMap<Option<String>, Vec<SpanLine>>) -> SpanNode {
        let mut kids = children
            .remove(&Some(span.span_id.clone()))
            .unwrap_or_default();
        kids.sort_by_key(|k| k.start_time_unix_nano);
        let kids = kids.into_iter().map(|k| attach(k, children)).collect();
        SpanNode {
            span,
            children: kids,
        }
    }
    let mut roots = children.remove(&None).unwrap_or_default();
    roots.sort_by_key(|r| r.start_time_unix_nano);
    let mut by_trace: BTreeMap<(u64, String), Vec<SpanNode>> = BTreeMap::new();
    let mut first_start: HashMap<String, u64> = HashMap::new();
    for root in roots {
        let start = *first_start
            .entry(root.trace_id.clone())
            .or_insert(root.start_time_unix_nano);
        let node = attach(root, &mut children);
        by_trace
            .entry((start, node.span.trace_id.clone()))
            .or_default()
            .push(node);
    }
    TraceForest {
        traces: by_trace
            .into_iter()
            .map(|((_, trace_id), roots)| TraceTree { trace_id, roots })
            .collect(),
        loose_events,
    }
}
