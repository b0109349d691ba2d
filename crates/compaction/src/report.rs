//! What a compaction did, for events, traces, the CLI and tests.
//!
//! The types are defined in the runtime, so that the event bus and the session log can carry
//! them typed; [`CompactionReport`] is re-exported at this crate's root for users of `compact`,
//! its parts ([`SummarizerUsage`], [`TierCounts`]) are named from `troupe_runtime`.

pub use troupe_runtime::CompactionReport;
pub(crate) use troupe_runtime::{DroppedArtifact, SummarizerUsage, TierCounts};
