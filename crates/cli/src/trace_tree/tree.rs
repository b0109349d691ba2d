//! Spans arranged as trees, one per trace.
//!
//! Parents come from `parent_span_id`, within one trace. Should an agent asked by another agent
//! have lost its parent (spans propagate through actor messages only when the runtime carries
//! them), its `invoke_agent` span is placed under the asking agent's `ask_agent` tool call of the
//! same trace that was running when it started.
//!
//! A trace's spans live in one flat arena ([`TraceTree::nodes`]) and children are indices into
//! it, so a chain of any depth is built, walked, compared and dropped without recursion (a
//! nested `Vec<SpanNode>` overflows the stack on a few thousand levels). Parent links that form
//! a cycle are broken at the cycle's earliest span, which becomes a root, with a warning: every
//! span of the file is in the forest.

use std::collections::{BTreeSet, HashMap};

use troupe_protocol::trace::semconv;

use super::escape::escape_control;
use troupe_protocol::trace::{EventLine, SpanLine, TraceLine};

/// A span with the indices of its children (in [`TraceTree::nodes`]), ordered by start time.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanNode {
    /// The span as the trace file recorded it.
    pub span: SpanLine,
    /// Its children: indices into the trace's [`TraceTree::nodes`].
    pub children: Vec<usize>,
}

/// One trace: its spans and which of them are roots (usually one).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceTree {
    /// 32 hex digits.
    pub trace_id: String,
    /// Every span of the trace, in file order; [`SpanNode::children`] and
    /// [`TraceTree::roots`] index into it.
    pub nodes: Vec<SpanNode>,
    /// Root spans (indices into `nodes`) by start time.
    pub roots: Vec<usize>,
}

/// Every trace of a file, in order of first start, plus events outside any span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceForest {
    /// One tree per trace id, in order of the trace's first span start.
    pub traces: Vec<TraceTree>,
    /// Warnings and errors logged outside any span.
    pub loose_events: Vec<EventLine>,
    /// What was odd about the spans' structure (parent cycles), one line each, already safe
    /// to print.
    pub warnings: Vec<String>,
}

impl SpanNode {
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

impl TraceTree {
    /// The node at `index` (an index from [`TraceTree::roots`] or [`SpanNode::children`]).
    ///
    /// # Panics
    /// When `index` is not an index into [`TraceTree::nodes`].
    pub fn node(&self, index: usize) -> &SpanNode {
        &self.nodes[index]
    }

    /// The children of `node`, by start time.
    pub fn children<'a>(&'a self, node: &'a SpanNode) -> impl Iterator<Item = &'a SpanNode> + 'a {
        node.children.iter().map(|&c| &self.nodes[c])
    }

    /// Every span reachable from the roots, depth first (parents before children, siblings by
    /// start time); iterative, so any depth is fine.
    pub fn walk(&self) -> Vec<&SpanNode> {
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut stack: Vec<usize> = self.roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            let node = &self.nodes[i];
            out.push(node);
            stack.extend(node.children.iter().rev().copied());
        }
        out
    }
}

fn str_attr<'a>(span: &'a SpanLine, name: &str) -> Option<&'a str> {
    span.attributes.get(name).and_then(|v| v.as_str())
}

/// For each orphaned agent invocation, the asking agent's `ask_agent` call of the same trace
/// whose time range contains the invocation (the latest-starting such call; on a tie, the later
/// in the file).
///
/// `O((calls + orphans) log calls)`: calls and orphans are swept by end time, latest first; the
/// calls that end late enough for the current orphan are kept in a set ordered by start, where
/// the latest one starting early enough is one range query away.
fn asking_calls(spans: &[SpanLine], orphans: &[usize]) -> HashMap<usize, usize> {
    // (asking agent) -> calls / orphans, as indices into `spans`.
    let mut calls: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, s) in spans.iter().enumerate() {
        if s.name == "execute_tool"
            && str_attr(s, semconv::TOOL_NAME) == Some("ask_agent")
            && let Some(agent) = str_attr(s, semconv::AGENT_NAME)
        {
            calls.entry(agent).or_default().push(i);
        }
    }
    let mut asked: HashMap<&str, Vec<usize>> = HashMap::new();
    for &o in orphans {
        if let Some(from) = str_attr(&spans[o], semconv::FROM)
            && calls.contains_key(from)
        {
            asked.entry(from).or_default().push(o);
        }
    }
    let mut found = HashMap::new();
    for (from, mut group) in asked {
        let Some(group_calls) = calls.get_mut(from) else {
            continue;
        };
        let end = |i: &usize| std::cmp::Reverse(spans[*i].end_time_unix_nano);
        group_calls.sort_by_key(end);
        group.sort_by_key(end);
        let mut open: BTreeSet<(u64, usize)> = BTreeSet::new();
        let mut next_call = 0;
        for o in group {
            let orphan = &spans[o];
            while let Some(&c) = group_calls.get(next_call)
                && spans[c].end_time_unix_nano >= orphan.end_time_unix_nano
            {
                open.insert((spans[c].start_time_unix_nano, c));
                next_call += 1;
            }
            if let Some(&(_, c)) = open
                .range(..=(orphan.start_time_unix_nano, usize::MAX))
                .next_back()
            {
                found.insert(o, c);
            }
        }
    }
    found
}

/// The parent (an index into `spans`) of each span of one trace; `None` for a root.
fn parents(spans: &[SpanLine]) -> Vec<Option<usize>> {
    let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(spans.len());
    for (i, s) in spans.iter().enumerate() {
        // A duplicated id names its first span.
        by_id.entry(s.span_id.as_str()).or_insert(i);
    }
    // A parent in another trace (an actor's task span around a request that starts a trace of
    // its own) does not nest: the request is the root of its trace.
    let mut parent: Vec<Option<usize>> = spans
        .iter()
        .map(|s| {
            s.parent_span_id
                .as_deref()
                .and_then(|p| by_id.get(p).copied())
        })
        .collect();
    let orphans: Vec<usize> = (0..spans.len())
        .filter(|&i| parent[i].is_none() && spans[i].name == "invoke_agent")
        .collect();
    for (orphan, call) in asking_calls(spans, &orphans) {
        parent[orphan] = Some(call);
    }
    parent
}

/// The most span ids a cycle warning names.
const CYCLE_IDS_SHOWN: usize = 16;

/// Break every cycle of parent links: the cycle's earliest-starting span loses its parent and
/// becomes a root. Returns one warning per cycle. Linear: each span is walked up from once.
fn break_cycles(trace_id: &str, spans: &[SpanLine], parent: &mut [Option<usize>]) -> Vec<String> {
    const UNSEEN: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; spans.len()];
    let mut warnings = Vec::new();
    let mut path = Vec::new();
    for start in 0..spans.len() {
        let mut at = Some(start);
        while let Some(i) = at
            && state[i] == UNSEEN
        {
            state[i] = ON_PATH;
            path.push(i);
            at = parent[i];
        }
        if let Some(i) = at
            && state[i] == ON_PATH
            && let Some(pos) = path.iter().position(|&p| p == i)
        {
            let cycle = &path[pos..];
            let root = cycle
                .iter()
                .copied()
                .min_by_key(|&c| (spans[c].start_time_unix_nano, c))
                .unwrap_or(i);
            warnings.push(cycle_warning(trace_id, spans, parent, root, cycle.len()));
            parent[root] = None;
        }
        for &p in &path {
            state[p] = DONE;
        }
        path.clear();
    }
    warnings
}

/// `trace T: the parent links of spans a → b → a form a cycle; span a is shown as a root`,
/// starting at `root` and following parents.
fn cycle_warning(
    trace_id: &str,
    spans: &[SpanLine],
    parent: &[Option<usize>],
    root: usize,
    len: usize,
) -> String {
    let mut ids = Vec::new();
    let mut at = root;
    for _ in 0..len.min(CYCLE_IDS_SHOWN) {
        ids.push(escape_control(&spans[at].span_id).into_owned());
        at = parent[at].unwrap_or(root);
    }
    let chain = if len > CYCLE_IDS_SHOWN {
        format!("{} → … ({} more)", ids.join(" → "), len - CYCLE_IDS_SHOWN)
    } else {
        format!("{} → {}", ids.join(" → "), ids[0])
    };
    format!(
        "trace {}: the parent links of spans {chain} form a cycle; span {} is shown as a root",
        escape_control(trace_id),
        ids[0]
    )
}

/// Arrange the spans of one trace (in file order) as a tree.
fn build_trace(trace_id: String, spans: Vec<SpanLine>, warnings: &mut Vec<String>) -> TraceTree {
    let mut parent = parents(&spans);
    warnings.extend(break_cycles(&trace_id, &spans, &mut parent));
    let mut nodes: Vec<SpanNode> = spans
        .into_iter()
        .map(|span| SpanNode {
            span,
            children: Vec::new(),
        })
        .collect();
    let mut roots = Vec::new();
    for (i, p) in parent.iter().enumerate() {
        match p {
            Some(p) => nodes[*p].children.push(i),
            None => roots.push(i),
        }
    }
    let start = |nodes: &[SpanNode], i: usize| nodes[i].span.start_time_unix_nano;
    for i in 0..nodes.len() {
        let mut kids = std::mem::take(&mut nodes[i].children);
        kids.sort_by_key(|&k| start(&nodes, k));
        nodes[i].children = kids;
    }
    roots.sort_by_key(|&r| start(&nodes, r));
    TraceTree {
        trace_id,
        nodes,
        roots,
    }
}

/// Arrange the records of a trace file as trees.
pub fn build_forest(lines: &[TraceLine]) -> TraceForest {
    build_forest_owned(lines.iter().cloned())
}

/// [`build_forest`] from records it may keep (no copy of every span).
pub fn build_forest_owned(lines: impl IntoIterator<Item = TraceLine>) -> TraceForest {
    let mut by_trace: Vec<(String, Vec<SpanLine>)> = Vec::new();
    let mut trace_index: HashMap<String, usize> = HashMap::new();
    let mut loose_events = Vec::new();
    for line in lines {
        match line {
            TraceLine::Span(s) => {
                let i = *trace_index.entry(s.trace_id.clone()).or_insert_with(|| {
                    by_trace.push((s.trace_id.clone(), Vec::new()));
                    by_trace.len() - 1
                });
                by_trace[i].1.push(s);
            }
            TraceLine::Event(e) => loose_events.push(e),
        }
    }
    let mut warnings = Vec::new();
    let mut traces: Vec<TraceTree> = by_trace
        .into_iter()
        .map(|(trace_id, spans)| build_trace(trace_id, spans, &mut warnings))
        .collect();
    // Traces in order of their first root's start (every trace has a root: cycles are broken).
    let first_start = |t: &TraceTree| {
        t.roots
            .first()
            .map_or(u64::MAX, |&r| t.nodes[r].span.start_time_unix_nano)
    };
    traces.sort_by(|a, b| {
        first_start(a)
            .cmp(&first_start(b))
            .then_with(|| a.trace_id.cmp(&b.trace_id))
    });
    TraceForest {
        traces,
        loose_events,
        warnings,
    }
}
