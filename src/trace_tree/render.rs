//! The text rendering of a trace forest: agent → turn → model call / tool call / compaction.

use std::fmt::Write as _;

use super::tree::{SpanNode, TraceForest, TraceTree};
use crate::telemetry::jsonl::EventLine;

/// A duration for people: `0.42 ms`, `12 ms`, `1.23 s`.
pub fn format_duration(ms: f64) -> String {
    if ms < 1.0 {
        format!("{ms:.2} ms")
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

/// Totals over one trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceTotals {
    /// Agent invocations.
    pub agents: usize,
    /// Model calls.
    pub model_calls: usize,
    /// Tool calls.
    pub tool_calls: usize,
    /// Prompt tokens over all model calls.
    pub input_tokens: u64,
    /// Generated tokens over all model calls.
    pub output_tokens: u64,
    /// Spans whose status is `error`.
    pub errors: usize,
}

impl TraceTree {
    /// Totals over every span of this trace.
    pub fn totals(&self) -> TraceTotals {
        let mut t = TraceTotals::default();
        for node in self.roots.iter().flat_map(SpanNode::walk) {
            match node.span.name.as_str() {
                "invoke_agent" => t.agents += 1,
                "chat" => {
                    t.model_calls += 1;
                    t.input_tokens += node.attr_u64("gen_ai.usage.input_tokens").unwrap_or(0);
                    t.output_tokens += node.attr_u64("gen_ai.usage.output_tokens").unwrap_or(0);
                }
                "execute_tool" => t.tool_calls += 1,
                _ => {}
            }
            t.errors += usize::from(node.span.status == "error");
        }
        t
    }

    fn duration_ms(&self) -> f64 {
        let start = self
            .roots
            .iter()
            .map(|r| r.span.start_time_unix_nano)
            .min()
            .unwrap_or(0);
        let end = self
            .roots
            .iter()
            .map(|r| r.span.end_time_unix_nano)
            .max()
            .unwrap_or(0);
        end.saturating_sub(start) as f64 / 1e6
    }
}

/// Attributes not worth a place in a label (ids, and what the label already says).
const QUIET_ATTRIBUTES: &[&str] = &[
    "gen_ai.operation.name",
    "gen_ai.agent.name",
    "troupe.trace_id",
    "troupe.parent_span_id",
    "troupe.from",
    "troupe.trigger",
];

/// The one-line description of a span.
fn label(node: &SpanNode) -> String {
    let attr = |name: &str| node.attr(name).unwrap_or_else(|| "?".to_string());
    let duration = format_duration(node.span.duration_ms);
    let mut text = match node.span.name.as_str() {
        "invoke_agent" => {
            let from = node
                .attr("troupe.from")
                .unwrap_or_else(|| "user".to_string());
            format!(
                "agent {}  (asked by {from})  {duration}",
                attr("gen_ai.agent.name")
            )
        }
        "turn" => format!("turn  {duration}"),
        "chat" => {
            let mut t = format!("model call {}  {duration}", attr("gen_ai.request.model"));
            if let (Some(i), Some(o)) = (
                node.attr_u64("gen_ai.usage.input_tokens"),
                node.attr_u64("gen_ai.usage.output_tokens"),
            ) {
                let _ = write!(t, "  tokens {i} in / {o} out");
            }
            t
        }
        "execute_tool" => {
            format!(
                "tool {} [{}]  {duration}",
                attr("gen_ai.tool.name"),
                attr("gen_ai.tool.call.id")
            )
        }
        other => {
            let extra: Vec<String> = node
                .span
                .attributes
                .iter()
                .filter(|(k, _)| !QUIET_ATTRIBUTES.contains(&k.as_str()))
                .map(|(k, v)| match v.as_str() {
                    Some(s) => format!("{k}={s}"),
                    None => format!("{k}={v}"),
                })
                .collect();
            let kind = if other == "compaction" {
                let trigger = node
                    .attr("troupe.trigger")
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                format!("compaction of {}{trigger}", attr("gen_ai.agent.name"))
            } else if other.contains("compact") || other.contains("compress") {
                format!("compaction {other}")
            } else {
                other.to_string()
            };
            if extra.is_empty() {
                format!("{kind}  {duration}")
            } else {
                format!("{kind}  {duration}  {}", extra.join(" "))
            }
        }
    };
    if node.span.status == "error" {
        text.push_str("  ERROR");
        if let Some(kind) = node.attr("error.type") {
            let _ = write!(text, " ({kind})");
        }
    }
    text
}

fn event_text(e: &EventLine) -> String {
    let mut text = format!("{}: {}", e.level.to_lowercase(), e.message);
    if let Some(error) = e.attributes.get("error") {
        let error = error
            .as_str()
            .map_or_else(|| error.to_string(), str::to_string);
        let _ = write!(text, ": {error}");
    }
    text
}

/// A display item: a real span, or a synthesized turn grouping one model call with the tool
/// calls that followed it.
enum Item<'a> {
    Span(&'a SpanNode),
    Turn(usize, Vec<&'a SpanNode>),
}

/// An agent's children grouped into turns: each model call opens a turn; spans before the first
/// model call stay directly under the agent. Spans already grouped by a `turn` span are kept.
fn items(node: &SpanNode) -> Vec<Item<'_>> {
    let group = node.span.name == "invoke_agent"
        && node.children.iter().any(|c| c.span.name == "chat")
        && !node.children.iter().any(|c| c.span.name == "turn");
    if !group {
        return node.children.iter().map(Item::Span).collect();
    }
    let mut out = Vec::new();
    let mut turns = 0;
    for child in &node.children {
        if child.span.name == "chat" {
            turns += 1;
            out.push(Item::Turn(turns, vec![child]));
        } else if let Some(Item::Turn(_, members)) = out.last_mut() {
            members.push(child);
        } else {
            out.push(Item::Span(child));
        }
    }
    out
}

fn render_node(out: &mut String, node: &SpanNode, prefix: &str, last: bool, root: bool) {
    let (branch, carry) = match (root, last) {
        (true, _) => ("", ""),
        (false, true) => ("└─ ", "   "),
        (false, false) => ("├─ ", "│  "),
    };
    let _ = writeln!(out, "{prefix}{branch}{}", label(node));
    let inner = format!("{prefix}{carry}");
    let items = items(node);
    let n_events = node.span.events.len();
    for (i, e) in node.span.events.iter().enumerate() {
        let last_line = i + 1 == n_events && items.is_empty();
        let b = if last_line { "└─ " } else { "├─ " };
        let _ = writeln!(out, "{inner}{b}! {}", event_text(e));
    }
    let n = items.len();
    for (i, item) in items.into_iter().enumerate() {
        let last = i + 1 == n;
        match item {
            Item::Span(child) => render_node(out, child, &inner, last, false),
            Item::Turn(number, members) => {
                let start = members
                    .iter()
                    .map(|m| m.span.start_time_unix_nano)
                    .min()
                    .unwrap_or(0);
                let end = members
                    .iter()
                    .map(|m| m.span.end_time_unix_nano)
                    .max()
                    .unwrap_or(0);
                let ms = end.saturating_sub(start) as f64 / 1e6;
                let (b, c) = if last {
                    ("└─ ", "   ")
                } else {
                    ("├─ ", "│  ")
                };
                let _ = writeln!(out, "{inner}{b}turn {number}  {}", format_duration(ms));
                let turn_prefix = format!("{inner}{c}");
                let m = members.len();
                for (j, member) in members.into_iter().enumerate() {
                    render_node(out, member, &turn_prefix, j + 1 == m, false);
                }
            }
        }
    }
}

/// Render one trace: a header with totals, then its span tree.
pub fn render_trace(trace: &TraceTree) -> String {
    let t = trace.totals();
    let mut out = format!(
        "trace {}  {}  agents {} · model calls {} · tool calls {} · tokens {} in / {} out · errors {}\n",
        trace.trace_id,
        format_duration(trace.duration_ms()),
        t.agents,
        t.model_calls,
        t.tool_calls,
        t.input_tokens,
        t.output_tokens,
        t.errors
    );
    for root in &trace.roots {
        render_node(&mut out, root, "", true, true);
    }
    out
}

/// Render every trace of a forest, then warnings logged outside any span.
pub fn render_forest(forest: &TraceForest) -> String {
    let mut out = String::new();
    for (i, trace) in forest.traces.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&render_trace(trace));
    }
    if !forest.loose_events.is_empty() {
        out.push_str("\noutside any span:\n");
        for e in &forest.loose_events {
            let _ = writeln!(out, "  ! {}", event_text(e));
        }
    }
    if forest.traces.is_empty() && forest.loose_events.is_empty() {
        out.push_str("(no spans in this trace file)\n");
    }
    out
}
