//! [`ModelSummarizer`]: any [`ChatModel`] as the compaction crate's [`Summarizer`].

use std::sync::Arc;

use async_trait::async_trait;
use troupe_compaction::{Summarizer, SummarizerError, SummaryPrompt};
use troupe_runtime::{ChatMessage, ChatModel, ChatRequest, ToolChoice};

/// Summaries written by a chat model (tier 3 of compaction).
#[derive(Clone)]
pub struct ModelSummarizer {
    model: Arc<dyn ChatModel>,
}

impl ModelSummarizer {
    /// Summarize with `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelSummarizer { model }
    }

    /// The model's name.
    pub fn model_name(&self) -> String {
        self.model.info().name
    }
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    fn context_window(&self) -> usize {
        self.model.info().context_window
    }

    async fn summarize(&self, prompt: SummaryPrompt) -> Result<String, SummarizerError> {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system(prompt.system),
                ChatMessage::user(prompt.user),
            ],
            tool_choice: ToolChoice::None,
            temperature: Some(0.2),
            max_tokens: u32::try_from(prompt.max_output_tokens).ok(),
            ..ChatRequest::default()
        };
        let response = self
            .model
            .chat(request)
            .await
            .map_err(|e| SummarizerError::Failed(e.to_string()))?;
        Ok(response.message.text())
    }
}
