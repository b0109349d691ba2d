//! The compression agent: a dedicated agent that compacts other agents' conversations.

mod agent;
mod config;
mod job;
mod model_loop;
mod remote;
mod scope;
mod summarizer;
pub mod tools;

pub use agent::{COMPRESSION_AGENT, CompressionAgent};
pub(crate) use agent::{compaction_span, record_report};
pub use config::{CompressionConfig, CompressorModel, DEFAULT_MAX_ITERATIONS};
pub use job::{CompactionJob, ScopeSummaryError, ScopeSummaryJob};
pub use remote::{RemoteCompaction, RemoteCompactionJob};
pub(crate) use remote::{accept_remote_compactions, compact_here};
pub use summarizer::ModelSummarizer;
