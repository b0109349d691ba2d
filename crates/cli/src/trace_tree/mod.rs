//! `troupe trace`: a trace file (lines as in [`troupe_protocol::trace::TraceLine`]) rendered as an
//! indented tree — agent → turn → model call / tool call / compaction — with durations, token
//! counts and errors.
//!
//! ```no_run
//! # fn main() -> Result<(), troupe_cli::trace_tree::TraceFileError> {
//! let text = troupe_cli::trace_tree::render_file("run.jsonl".as_ref())?;
//! print!("{text}");
//! # Ok(()) }
//! ```

mod escape;
mod follow;
mod parse;
mod render;
mod tree;

use std::path::Path;

use troupe_protocol::trace::TraceRead;

pub use escape::escape_control;
pub use follow::TraceFollower;
pub use parse::{TraceFileError, read_trace_file};
pub use render::{TraceTotals, format_duration, render_forest, render_trace};
pub use tree::{SpanNode, TraceForest, TraceTree, build_forest, build_forest_owned};

/// Read a trace file and render it; warnings about lines not read as they stood (the one
/// reader's rule: said, skipped, counted) and about the spans' structure come first, as
/// `warning:` lines. Every string from the file is printed with its control characters escaped.
///
/// # Errors
/// [`TraceFileError`] when the file cannot be read.
pub fn render_file(path: &Path) -> Result<String, TraceFileError> {
    render_files(&[path])
}

/// Read several trace files — e.g. one per cluster node — and render them as one forest: the
/// spans of one trace from every file form one tree, linked across files by their span ids.
///
/// # Errors
/// [`TraceFileError`] for the first file that cannot be read.
pub fn render_files(paths: &[&Path]) -> Result<String, TraceFileError> {
    let mut out = String::new();
    let mut lines = Vec::new();
    for path in paths {
        let read = read_trace_file(path)?;
        out.push_str(&render_warnings(path, &read));
        lines.extend(read.lines);
    }
    out.push_str(&render_forest(&build_forest_owned(lines)));
    Ok(out)
}

/// The `warning:` lines about what of the trace file at `path` was not read as it stood (empty
/// when every line was), escaped.
pub fn render_warnings(path: &Path, read: &TraceRead) -> String {
    let mut out = String::new();
    for w in read.warnings(path) {
        out.push_str("warning: ");
        out.push_str(&escape_control(&w));
        out.push('\n');
    }
    out
}
