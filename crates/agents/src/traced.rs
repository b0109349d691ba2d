//! The `chat` and `execute_tool` spans: every model call an agent makes — its turn loop, the
//! compression agent's tool loop, a summary — goes through [`traced_chat`], and every tool call
//! opens [`tool_span`], so each is one span with the GenAI attributes (model or tool, agent,
//! usage, error type and, when content recording is on, messages and tool arguments).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use tracing::Instrument;
use troupe_protocol::trace::{self, content, semconv};
use troupe_protocol::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, ModelError, ModelInfo, ToolCall,
    collect_stream,
};

use crate::spend::SpendMeter;
use troupe_models::{StreamObserver, observe};

/// Call `model` with `request` inside a `chat` span attributed to `agent`: the collected form
/// of [`traced_chat_stream`].
///
/// # Errors
/// The model's error, unchanged (recorded on the span as `error.type`).
pub async fn traced_chat(
    model: &dyn ChatModel,
    request: ChatRequest,
    agent: &str,
) -> Result<ChatResponse, ModelError> {
    collect_stream(traced_chat_stream(model, request, agent).await?).await
}

/// Call `model` with `request` as a stream inside a `chat` span attributed to `agent`.
///
/// The span lives as long as the stream: it ends when the stream ends or is dropped (a dropped
/// stream records `error.type = cancelled`). It records the time from the call to the first
/// delta (`gen_ai.response.time_to_first_chunk`, seconds), the usage the stream reports, and,
/// when content recording is on, the answer the deltas add up to.
///
/// # Errors
/// The model's error before the answer started, unchanged (recorded as `error.type`); errors
/// later are the stream's items, recorded the same way.
pub async fn traced_chat_stream(
    model: &dyn ChatModel,
    request: ChatRequest,
    agent: &str,
) -> Result<ChatStream, ModelError> {
    open_chat(model, request, agent, None).await
}

/// [`traced_chat_stream`] for an agent with a budget: the answer's usage goes into `meter` as
/// the stream ends — the one place an agent's own model calls are metered — and, when its
/// model has a price, what the call cost goes on the span as `troupe.spend.cost_micros`: the
/// metrics read the very number the budget counted.
pub(crate) async fn metered_chat_stream(
    model: &dyn ChatModel,
    request: ChatRequest,
    agent: &str,
    meter: &SpendMeter,
) -> Result<ChatStream, ModelError> {
    open_chat(model, request, agent, Some(meter.clone())).await
}

async fn open_chat(
    model: &dyn ChatModel,
    mut request: ChatRequest,
    agent: &str,
    meter: Option<SpendMeter>,
) -> Result<ChatStream, ModelError> {
    // Every agent's call passes here: this is where a request learns who asks (a request that
    // already names its agent keeps it).
    request.agent.get_or_insert_with(|| agent.to_string());
    let info = model.info();
    let span = tracing::info_span!(
        "chat",
        { semconv::OPERATION_NAME } = "chat",
        { semconv::REQUEST_MODEL } = %info.name,
        { semconv::AGENT_NAME } = %agent,
        { semconv::REQUEST_STREAM } = true,
        { semconv::RESPONSE_TIME_TO_FIRST_CHUNK } = tracing::field::Empty,
        { semconv::USAGE_INPUT_TOKENS } = tracing::field::Empty,
        { semconv::USAGE_OUTPUT_TOKENS } = tracing::field::Empty,
        { semconv::USAGE_CACHE_READ_INPUT_TOKENS } = tracing::field::Empty,
        { semconv::USAGE_CACHE_CREATION_INPUT_TOKENS } = tracing::field::Empty,
        { semconv::SPEND_COST_MICROS } = tracing::field::Empty,
        // Recorded by a shared rate limit the model is under (`rate_limit/`), inside this span.
        { semconv::RATE_LIMIT_WAITED_MS } = tracing::field::Empty,
        { semconv::RATE_LIMIT_HOLDS } = tracing::field::Empty,
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
    let started = Instant::now();
    match model.chat_stream(request).instrument(span.clone()).await {
        Ok(stream) => {
            let observer = ChatSpan {
                span: span.clone(),
                started,
                record_content,
                meter,
            };
            Ok(observe(stream, Box::new(observer), span))
        }
        Err(e) => {
            record_error(&span, &e);
            Err(e)
        }
    }
}

fn record_error(span: &tracing::Span, e: &ModelError) {
    span.record(semconv::ERROR_TYPE, e.kind());
    tracing::warn!(parent: span, error = %e, "model call failed");
}

/// Records a streamed answer on its `chat` span; the span closes when this (and the stream
/// holding it) is gone.
struct ChatSpan {
    span: tracing::Span,
    started: Instant,
    record_content: bool,
    /// The budget meter of the agent whose call it is, when it has one.
    meter: Option<SpendMeter>,
}

impl StreamObserver for ChatSpan {
    fn first_delta(&mut self) {
        let seconds = self.started.elapsed().as_secs_f64();
        self.span
            .record(semconv::RESPONSE_TIME_TO_FIRST_CHUNK, seconds);
    }

    fn finished(self: Box<Self>, outcome: &Result<ChatResponse, ModelError>) {
        match outcome {
            Ok(response) => {
                let span = &self.span;
                span.record(semconv::USAGE_INPUT_TOKENS, response.usage.input_tokens);
                span.record(semconv::USAGE_OUTPUT_TOKENS, response.usage.output_tokens);
                if let Some(meter) = &self.meter {
                    let spent = meter.record(response.usage);
                    // Without a price the cost is 0 by default, not by measure: left out.
                    if meter.is_priced() {
                        span.record(semconv::SPEND_COST_MICROS, spent.cost_micros);
                    }
                }
                // Only what the provider reported: a provider without a prompt cache (or one
                // that says nothing about it) leaves the attributes out rather than claiming 0.
                let usage = &response.usage;
                if usage.cache_read_input_tokens > 0 {
                    span.record(
                        semconv::USAGE_CACHE_READ_INPUT_TOKENS,
                        usage.cache_read_input_tokens,
                    );
                }
                if usage.cache_creation_input_tokens > 0 {
                    span.record(
                        semconv::USAGE_CACHE_CREATION_INPUT_TOKENS,
                        usage.cache_creation_input_tokens,
                    );
                }
                if self.record_content {
                    let output =
                        content::output_messages(&response.message, &response.finish_reason);
                    span.record(semconv::OUTPUT_MESSAGES, output.as_str());
                }
            }
            Err(e) => record_error(&self.span, e),
        }
    }

    fn dropped(self: Box<Self>) {
        self.span
            .record(semconv::ERROR_TYPE, ModelError::Cancelled.kind());
    }
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
        // Recorded by a tool an MCP server serves (troupe-mcp), inside this span.
        { semconv::MCP_SERVER } = tracing::field::Empty,
        // Recorded by a tool that runs a command (shell, a sandboxed MCP server's tools).
        { semconv::SANDBOX_POLICY } = tracing::field::Empty,
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
    /// The meter the calls count against, when they are spent for an agent with a budget.
    meter: Option<SpendMeter>,
}

impl TracedModel {
    /// Trace `inner`'s calls as `agent`'s.
    pub fn new(inner: Arc<dyn ChatModel>, agent: impl Into<String>) -> Self {
        TracedModel {
            inner,
            agent: agent.into(),
            meter: None,
        }
    }

    /// Meter every call into `meter`, when there is one, as [`metered_chat_stream`] does: what a
    /// compaction's summarizer or a scope's summary spends for an agent counts against that
    /// agent's budgets, and its cost is on the call's span like the agent's own calls'.
    pub(crate) fn metered(mut self, meter: Option<SpendMeter>) -> Self {
        self.meter = meter;
        self
    }
}

#[async_trait]
impl ChatModel for TracedModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        open_chat(
            self.inner.as_ref(),
            request,
            &self.agent,
            self.meter.clone(),
        )
        .await
    }
}
