//! The [`Summarizer`] trait: whatever writes summaries (a model, or no model at all).

use async_trait::async_trait;

use super::inline::InlineSummary;
use super::prompt::SummaryPrompt;

/// Writes the text of a summary for a prompt.
///
/// Implementations: a chat model (troupe-agents), the [`super::MechanicalSummarizer`] (no model),
/// and scripted fakes in tests. Compaction never sends a prompt whose
/// [`SummaryPrompt::request_tokens`] exceeds [`Summarizer::context_window`]: it splits the input
/// and folds the partial summaries instead.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// The summarizer's context window in tokens (input and output together).
    fn context_window(&self) -> usize;

    /// A short name for reports.
    fn name(&self) -> &str {
        "summarizer"
    }

    /// The summary text for `prompt` (the structured body only; troupe adds the file lists).
    async fn summarize(&self, prompt: SummaryPrompt) -> Result<String, SummarizerError>;

    /// `Some` when this summarizer is the agent's own model and can summarize by continuing
    /// the agent's conversation ([`Summarizer::summarize_inline`]): the tokens each such
    /// request carries besides its messages (the agent's tool definitions, sent again so the
    /// request's prefix is the agent's). `None`, the default: every summary is asked with a
    /// prompt of its own.
    fn inline_overhead(&self) -> Option<usize> {
        None
    }

    /// The summary text for a request that continues the agent's conversation (see
    /// [`super::inline_summary`]). The default sends the separate prompt of the same segment.
    async fn summarize_inline(&self, request: InlineSummary) -> Result<String, SummarizerError> {
        self.summarize(request.prompt).await
    }
}

/// Why no summary came back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummarizerError {
    /// The summarizer (model, network, …) failed.
    #[error("the summarizer failed: {0}")]
    Failed(String),
    /// The summarizer answered with nothing usable.
    #[error("the summarizer returned an empty summary")]
    Empty,
    /// Even an empty request does not fit the summarizer's window.
    #[error(
        "the summarizer's context window ({window} tokens) cannot hold a request of {needed} tokens"
    )]
    WindowTooSmall {
        /// The summarizer's window.
        window: usize,
        /// The smallest request it would need.
        needed: usize,
    },
}
