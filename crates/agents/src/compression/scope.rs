//! Scoped compression: the summary of one closed scope, written by the model the agent named.

use troupe_protocol::{ChatMessage, ChatModel, ChatRequest, RequestPriority, collect_stream};

use crate::TracedModel;
use crate::compression::job::{ScopeSummaryError, ScopeSummaryRequest};

/// Characters of each message the scope's summarizer sees.
const MESSAGE_CHARS: usize = 2_000;

const SYSTEM: &str = "You compress one finished part of an agent's work into a short summary \
                      that keeps results, decisions and file names.";

/// Summarize `job`'s messages with its model; `agent` is the compression agent (for the span).
pub(crate) async fn summarize_scope(
    job: &ScopeSummaryRequest,
    agent: &str,
) -> Result<String, ScopeSummaryError> {
    let transcript: String = job
        .messages
        .iter()
        .map(|m| {
            format!(
                "{}: {}\n",
                m.role,
                m.text().chars().take(MESSAGE_CHARS).collect::<String>()
            )
        })
        .collect();
    let instruction = job
        .prompt
        .clone()
        .unwrap_or_else(|| "Summarize what was done and found, briefly.".into());
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system(SYSTEM).into(),
            ChatMessage::user(format!("{instruction}\n\n{transcript}")).into(),
        ],
        max_tokens: Some(400),
        temperature: Some(0.2),
        priority: RequestPriority::Background,
        ..ChatRequest::default()
    };
    // Metered into the asking agent's budgets like its own calls and its compactions'.
    let model = TracedModel::new(job.model.clone(), agent).metered(job.spend.clone());
    let answer = match model.chat_stream(request).await {
        Ok(stream) => collect_stream(stream).await,
        Err(e) => Err(e),
    };
    let summary = answer
        .map_err(|e| ScopeSummaryError::Model(e.to_string()))?
        .message
        .text();
    let summary = summary.trim();
    if summary.is_empty() {
        return Err(ScopeSummaryError::Empty);
    }
    Ok(summary.to_string())
}
