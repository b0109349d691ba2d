//! The text rendering of a trace forest: agent → turn → model call / tool call / compaction.

use std::fmt::Write as _;

use troupe_protocol::trace::semconv;

use super::escape::escape_control;
use super::tree::{SpanNode, TraceForest, TraceTree};
use troupe_protocol::trace::EventLine;

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
        for node in self.walk() {
            match node.span.name.as_str() {
                "invoke_agent" => t.agents += 1,
                "chat" => {
                    t.model_calls += 1;
                    // Saturating: the counts are what providers reported.
                    let tokens = |key| node.attr_u64(key).unwrap_or(0);
                    t.input_tokens = t
                        .input_tokens
                        .saturating_add(tokens(semconv::USAGE_INPUT_TOKENS));
                    t.output_tokens = t
                        .output_tokens
                        .saturating_add(tokens(semconv::USAGE_OUTPUT_TOKENS));
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
            .map(|&r| self.node(r).span.start_time_unix_nano)
            .min()
            .unwrap_or(0);
        let end = self
            .roots
            .iter()
            .map(|&r| self.node(r).span.end_time_unix_nano)
            .max()
            .unwrap_or(0);
        end.saturating_sub(start) as f64 / 1e6
    }
}

/// Attributes not worth a place in a label (ids, and what the label already says).
const QUIET_ATTRIBUTES: &[&str] = &[
    semconv::OPERATION_NAME,
    semconv::AGENT_NAME,
    semconv::TRACE_ID,
    semconv::PARENT_SPAN_ID,
    semconv::FROM,
    semconv::TRIGGER,
];

/// The one-line description of a span.
fn label(node: &SpanNode) -> String {
    let attr = |name: &str| node.attr(name).unwrap_or_else(|| "?".to_string());
    let duration = format_duration(node.span.duration_ms);
    let mut text = match node.span.name.as_str() {
        "invoke_agent" => {
            let from = node
                .attr(semconv::FROM)
                .unwrap_or_else(|| "user".to_string());
            format!(
                "agent {}  (asked by {from})  {duration}",
                attr(semconv::AGENT_NAME)
            )
        }
        "turn" => format!("turn  {duration}"),
        "chat" => {
            let mut t = format!("model call {}  {duration}", attr(semconv::REQUEST_MODEL));
            if let (Some(i), Some(o)) = (
                node.attr_u64(semconv::USAGE_INPUT_TOKENS),
                node.attr_u64(semconv::USAGE_OUTPUT_TOKENS),
            ) {
                let _ = write!(t, "  tokens {i} in / {o} out");
            }
            t
        }
        "execute_tool" => {
            format!(
                "tool {} [{}]  {duration}",
                attr(semconv::TOOL_NAME),
                attr(semconv::TOOL_CALL_ID)
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
                    .attr(semconv::TRIGGER)
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                format!("compaction of {}{trigger}", attr(semconv::AGENT_NAME))
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
        if let Some(kind) = node.attr(semconv::ERROR_TYPE) {
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
fn items<'a>(trace: &'a TraceTree, node: &'a SpanNode) -> Vec<Item<'a>> {
    let group = node.span.name == "invoke_agent"
        && trace.children(node).any(|c| c.span.name == "chat")
        && !trace.children(node).any(|c| c.span.name == "turn");
    if !group {
        return trace.children(node).map(Item::Span).collect();
    }
    let mut out = Vec::new();
    let mut turns = 0;
    for child in trace.children(node) {
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

/// How many levels are drawn with their own indentation; deeper lines keep the indentation of
/// this level and say their depth (`[depth 1234]`), so a deep chain prints in linear space
/// instead of a prefix per line as long as the chain.
const MAX_INDENT: usize = 64;

/// What is left to draw, on an explicit stack (a deep chain would overflow the call stack).
enum Step<'a> {
    /// A line for an item, then its contents one level deeper.
    Item {
        item: Item<'a>,
        last: bool,
        root: bool,
        depth: usize,
    },
    /// Back to the prefix of an enclosing level.
    Outdent(usize),
}

fn branch(last: bool) -> (&'static str, &'static str) {
    if last {
        ("└─ ", "   ")
    } else {
        ("├─ ", "│  ")
    }
}

/// Draw `root` and everything below it.
fn render_root(out: &mut String, trace: &TraceTree, root: &SpanNode) {
    let mut prefix = String::new();
    let mut stack = vec![Step::Item {
        item: Item::Span(root),
        last: true,
        root: true,
        depth: 0,
    }];
    while let Some(step) = stack.pop() {
        let (item, last, root, depth) = match step {
            Step::Outdent(len) => {
                prefix.truncate(len);
                continue;
            }
            Step::Item {
                item,
                last,
                root,
                depth,
            } => (item, last, root, depth),
        };
        let (b, carry) = if root { ("", "") } else { branch(last) };
        let deep = if depth > MAX_INDENT {
            format!("[depth {depth}] ")
        } else {
            String::new()
        };
        stack.push(Step::Outdent(prefix.len()));
        match item {
            Item::Span(node) => {
                let _ = writeln!(out, "{prefix}{b}{deep}{}", escape_control(&label(node)));
                if depth < MAX_INDENT {
                    prefix.push_str(carry);
                }
                let items = items(trace, node);
                let n_events = node.span.events.len();
                for (i, e) in node.span.events.iter().enumerate() {
                    let last_line = i + 1 == n_events && items.is_empty();
                    let (eb, _) = branch(last_line);
                    let _ = writeln!(out, "{prefix}{eb}! {}", escape_control(&event_text(e)));
                }
                push_items(&mut stack, items, depth + 1);
            }
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
                let _ = writeln!(
                    out,
                    "{prefix}{b}{deep}turn {number}  {}",
                    format_duration(ms)
                );
                if depth < MAX_INDENT {
                    prefix.push_str(carry);
                }
                push_items(
                    &mut stack,
                    members.into_iter().map(Item::Span).collect(),
                    depth + 1,
                );
            }
        }
    }
}

/// Queue `items` (drawn in order: pushed last first).
fn push_items<'a>(stack: &mut Vec<Step<'a>>, items: Vec<Item<'a>>, depth: usize) {
    let n = items.len();
    for (i, item) in items.into_iter().enumerate().rev() {
        stack.push(Step::Item {
            item,
            last: i + 1 == n,
            root: false,
            depth,
        });
    }
}

/// Render one trace: a header with totals, then its span tree.
pub fn render_trace(trace: &TraceTree) -> String {
    let t = trace.totals();
    let mut out = format!(
        "trace {}  {}  agents {} · model calls {} · tool calls {} · tokens {} in / {} out · errors {}\n",
        escape_control(&trace.trace_id),
        format_duration(trace.duration_ms()),
        t.agents,
        t.model_calls,
        t.tool_calls,
        t.input_tokens,
        t.output_tokens,
        t.errors
    );
    for &root in &trace.roots {
        render_root(&mut out, trace, trace.node(root));
    }
    out
}

/// Render every trace of a forest, then warnings logged outside any span; warnings about the
/// forest's structure (parent cycles) come first, as `warning:` lines.
pub fn render_forest(forest: &TraceForest) -> String {
    let mut out = String::new();
    for w in &forest.warnings {
        let _ = writeln!(out, "warning: {}", escape_control(w));
    }
    for (i, trace) in forest.traces.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&render_trace(trace));
    }
    if !forest.loose_events.is_empty() {
        out.push_str("\noutside any span:\n");
        for e in &forest.loose_events {
            let _ = writeln!(out, "  ! {}", escape_control(&event_text(e)));
        }
    }
    if forest.traces.is_empty() && forest.loose_events.is_empty() {
        out.push_str("(no spans in this trace file)\n");
    }
    out
}
