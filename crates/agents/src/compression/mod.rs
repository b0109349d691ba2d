//! The compression agent: a dedicated agent that compacts other agents' conversations.

mod agent;
mod job;
mod model_loop;
mod scope;
mod summarizer;
pub mod tools;

pub use agent::{COMPRESSION_AGENT, CompressionAgent, CompressionConfig, DEFAULT_MAX_ITERATIONS};
pub use job::{CompactionJob, ScopeSummaryError, ScopeSummaryJob};
pub use summarizer::ModelSummarizer;
