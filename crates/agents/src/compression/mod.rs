//! The compression agent: a dedicated agent that compacts other agents' conversations, and the
//! compaction client every asker goes through (`client.rs`).

mod agent;
pub(crate) mod client;
mod config;
pub mod hooks;
mod job;
mod model_loop;
mod remote;
mod schedule;
mod scope;
mod summarizer;
mod task;
pub mod tools;
mod workers;

pub use agent::{COMPRESSION_AGENT, CompressionAgent};
pub use client::{CompactionCaller, compact};
pub(crate) use client::{compact_and_apply, summarize_scope};
pub use config::{
    CompressionConfig, CompressorModel, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_ITERATIONS,
};
pub use job::{
    CompactionRequest, CompressorJob, Hurry, InProcess, ScopeSummaryError, ScopeSummaryRequest,
};
pub use remote::RemoteCompaction;
pub(crate) use remote::accept_remote_compactions;
pub use summarizer::ModelSummarizer;
