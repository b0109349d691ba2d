//! Reading what a run wrote: a future run to its end, the spans of a trace file.

use troupe::protocol::trace::{SpanLine, TraceLine};
use troupe_cli::trace_tree::read_trace_file;

pub(crate) fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

pub(crate) fn spans(path: &std::path::Path) -> Vec<SpanLine> {
    read_trace_file(path)
        .unwrap()
        .lines
        .into_iter()
        .filter_map(|l| match l {
            TraceLine::Span(s) => Some(s),
            TraceLine::Event(_) => None,
        })
        .collect()
}
