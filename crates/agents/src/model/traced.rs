//! The `chat` and `execute_tool` spans: every model call an agent makes — its turn loop, the
//! compression agent's tool loop, a summary — goes through [`traced_chat`], and every tool call
//! opens [`tool_span`], so each is one span with the GenAI attributes (model or tool, agent,
//! usage, error type and, when content recording is on, messages and tool arguments).

use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;
use troupe_runtime::trace::{self, content, semconv};
use troupe_runtime::{ChatModel, ChatRequest, ChatResponse, ModelError, ModelInfo, ToolCall};

/// Call `model` with `request` inside a `chat` span attributed to `agent`.
///
/// # Errors
/// The model's error, unchanged (recorded on the span as `error.type`).
pub async fn traced_chat(
    model: &dyn ChatModel,
    request: ChatRequest,
    agent: &str,
) -> Result<ChatResponse, ModelError> {
    let info = model.info();
    let span = tracing::info_span!(
        "chat",
        { semconv::OPERATION_NAME } = "chat",
        { semconv::REQUEST_MODEL } = %info.name,
        { semconv::AGENT_NAME } = %agent,
        { semconv::USAGE_INPUT_TOKENS } = tracing::field::Empty,
        { semconv::USAGE_OUTPUT_TOKENS } = tracing::field::Empty,
        { semconv::ERROR_TYPE } = tracing::field::Empty,
        { semconv::SYSTEM_INSTRUCTIONS } = tracing::field::Empty,
        { semconv::INPUT_MESSAGES } = tracing::field::Empty,
        { semconv::OUTPUT_MESSAGES } = tracing::field::Empty,
    );
    // Content is serialized only when asked for: by default this is one atomic load.
    let record_content = trace::record_content();
    if record_content {
        if let Some(system) = content::system_instructions(&request.messages) {
            span.record(semconv::SYSTEM_INSTRUCTIONS, system.as_str());
        }
        let input = content::input_messages(&request.messages);
        span.record(semconv::INPUT_MESSAGES, input.as_str());
    }
    let result = model.chat(request).instrument(span.clone()).await;
    match &result {
        Ok(response) => {
            span.record(semconv::USAGE_INPUT_TOKENS, response.usage.input_tokens);
            span.record(semconv::USAGE_OUTPUT_TOKENS, response.usage.output_tokens);
            if record_content {
                let output = content::output_messages(&response.message, &response.finish_reason);
                span.record(semconv::OUTPUT_MESSAGES, output.as_str());
            }
        }
        Err(e) => {
            span.record(semconv::ERROR_TYPE, e.kind());
            tracing::warn!(parent: &span, error = %e, "model call failed");
        }
    }
    result
}

/// The `execute_tool` span of `call` made by `agent`, with its arguments when content is
/// recorded; the caller records `gen_ai.tool.call.result` (and `error.type`) when it has them.
pub fn tool_span(call: &ToolCall, agent: &str) -> tracing::Span {
    let span = tracing::info_span!(
        "execute_tool",
        { semconv::OPERATION_NAME } = "execute_tool",
        { semconv::TOOL_NAME } = %call.function.name,
        { semconv::TOOL_CALL_ID } = %call.id,
        { semconv::AGENT_NAME } = %agent,
        { semconv::ERROR_TYPE } = tracing::field::Empty,
        { semconv::TOOL_CALL_ARGUMENTS } = tracing::field::Empty,
        { semconv::TOOL_CALL_RESULT } = tracing::field::Empty,
    );
    if trace::record_content() {
        span.record(
            semconv::TOOL_CALL_ARGUMENTS,
            call.function.arguments.as_str(),
        );
    }
    span
}

/// A model whose every call is a `chat` span attributed to one agent (see [`traced_chat`]):
/// what the compression agent hands the summarizer, so summaries show in the trace too.
#[derive(Clone)]
pub struct TracedModel {
    inner: Arc<dyn ChatModel>,
    agent: String,
}

impl TracedModel {
    /// Trace `inner`'s calls as `agent`'s.
    pub fn new(inner: Arc<dyn ChatModel>, agent: impl Into<String>) -> Self {
        TracedModel {
            inner,
            agent: agent.into(),
        }
    }
}

#[async_trait]
impl ChatModel for TracedModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        traced_chat(self.inner.as_ref(), request, &self.agent).await
    }
}
