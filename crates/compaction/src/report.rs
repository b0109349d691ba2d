//! What a compaction did, for events, traces, the CLI and tests.
//!
//! The types are defined in the runtime (`troupe_runtime::compaction_report`), so that the event
//! bus and the session log can carry them typed; every path through this crate keeps working.

pub use troupe_runtime::{CompactionReport, SummarizerUsage, TierCounts};
