//! The [`ChatModel`] trait every provider implements, with its request and response types.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::ChatMessage;
use crate::model_stream::{ChatStream, collect_stream};

/// A tool the model may call, as an OpenAI function definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The function's name.
    pub name: String,
    /// What the function does, for the model.
    pub description: String,
    /// A JSON Schema object for the arguments.
    pub parameters: Value,
}

impl ToolDefinition {
    /// The longest name OpenAI-style function calling accepts — for a function, and for a
    /// response format's schema (`^[a-zA-Z0-9_-]{1,64}$` both).
    pub const MAX_NAME: usize = 64;

    /// Whether `c` may appear in such a name: `a-z`, `A-Z`, `0-9`, `_` and `-`.
    pub fn is_name_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_' || c == '-'
    }

    /// `name` with every character such a name may not hold replaced by `_`; not cut to
    /// [`ToolDefinition::MAX_NAME`], and empty when `name` is (each caller has its fallback).
    pub fn sanitized_name(name: &str) -> String {
        name.chars()
            .map(|c| if Self::is_name_char(c) { c } else { '_' })
            .collect()
    }

    /// The OpenAI `tools[]` entry: `{"type": "function", "function": {name, description, parameters}}`.
    pub fn to_openai_json(&self) -> Value {
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Named(String),
}

/// Who waits for a model call: a model with one queue (the embedded llama.cpp model) serves
/// queued [`Interactive`](RequestPriority::Interactive) calls before queued
/// [`Background`](RequestPriority::Background) ones, so the compression agent working ahead
/// never holds up the agent it serves. Providers with their own servers ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RequestPriority {
    /// An agent's own call: a turn is waiting for it.
    #[default]
    Interactive,
    /// Work nobody's turn waits on yet (the compression agent's summaries and model loop).
    Background,
}

/// One request to a chat model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The conversation so far, shared with the agent's [`Conversation`](crate::Conversation):
    /// building a request copies pointers, not messages.
    pub messages: Vec<Arc<ChatMessage>>,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Tool-choice policy.
    pub tool_choice: ToolChoice,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Cap on generated tokens.
    pub max_tokens: Option<u32>,
    /// Who waits for the answer; only a model with one queue (the local model) uses it, and
    /// it never reaches a provider's wire.
    pub priority: RequestPriority,
    /// The name of the agent that asks (the compression agent's own for its calls): a model
    /// that keeps state per agent (the local model's KV sequences) keeps each agent's apart;
    /// `traced_chat_stream` fills it in. It never reaches a provider's wire.
    pub agent: Option<String>,
    /// The JSON Schema a text answer must match (a typed ask, [`ResponseFormat`](crate::ResponseFormat)): each provider
    /// constrains its answer its own way — OpenAI-compatible `response_format`, the embedded
    /// model's grammar; one that cannot ignores it (the answer is checked either way). Tool
    /// calls are not constrained by it.
    pub response_format: Option<crate::ResponseFormat>,
}

impl ChatRequest {
    /// A request over these messages (owned or shared) with no tools.
    pub fn new(messages: impl IntoIterator<Item = impl Into<Arc<ChatMessage>>>) -> Self {
        ChatRequest {
            messages: messages.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }
}

/// Token usage of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens: all of them, those read from or written to a provider's prompt cache
    /// included (OpenAI's `prompt_tokens`; Anthropic's three input counts added up, its own
    /// `input_tokens` being only those after the last cache mark), so budgets and compaction see
    /// the whole prompt whichever provider answered. The uncached part is this less the two
    /// cache counts below; [`Spend::of`](crate::Spend::of) prices each part once.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Of [`Usage::input_tokens`], those read from the provider's prompt cache (Anthropic's
    /// `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`).
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Of [`Usage::input_tokens`], those written to the provider's prompt cache by this call
    /// (Anthropic's `cache_creation_input_tokens`; OpenAI caches without saying so).
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end.
    #[default]
    Stop,
    /// The model asked for tool calls.
    ToolCalls,
    /// `max_tokens` was reached.
    Length,
    /// The provider filtered the output.
    ContentFilter,
    /// Something else the provider said.
    Other(String),
}

/// The model's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The assistant message (text and/or tool calls).
    pub message: ChatMessage,
    /// Token usage.
    pub usage: Usage,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
}

/// What a model is and can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The model's name as the provider knows it.
    pub name: String,
    /// Its context window in tokens.
    pub context_window: usize,
    /// Whether it can call tools.
    pub supports_tools: bool,
}

/// Everything that can go wrong when calling a model.
///
/// Serializable because it travels inside `AgentError::Model` (troupe-runtime), to
/// callers on other nodes too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ModelError {
    /// The key was missing or refused.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The provider does not know this model.
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    /// The request does not fit the model's context window.
    #[error("context length exceeded: {0}")]
    ContextLengthExceeded(String),
    /// Too many requests, after retries.
    #[error("rate limited: {0}")]
    RateLimited(String),
    /// The provider failed (5xx), after retries.
    #[error("provider error (HTTP {status}): {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// Any other refusal of the request (4xx).
    #[error("request rejected (HTTP {status}): {message}")]
    BadRequest {
        /// HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// The request was refused before it was sent: it cannot be encoded for this provider, or
    /// (record/replay) does not match the recording.
    #[error("invalid request (not sent): {0}")]
    InvalidRequest(String),
    /// No answer in time, after retries.
    #[error("model call timed out after {0} s")]
    Timeout(u64),
    /// The answer could not be understood.
    #[error("invalid response from the model provider: {0}")]
    InvalidResponse(String),
    /// The connection failed.
    #[error("transport error: {0}")]
    Transport(String),
    /// The call was cancelled.
    #[error("model call cancelled")]
    Cancelled,
    /// The model could not be loaded or run.
    #[error("model unavailable: {0}")]
    Unavailable(String),
}

impl ModelError {
    /// The variant's name in snake case (`context_length_exceeded`, `timeout`, …): a
    /// low-cardinality value for the OpenTelemetry `error.type` attribute.
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::Auth(_) => "auth",
            ModelError::UnknownModel(_) => "unknown_model",
            ModelError::ContextLengthExceeded(_) => "context_length_exceeded",
            ModelError::RateLimited(_) => "rate_limited",
            ModelError::Server { .. } => "server",
            ModelError::BadRequest { .. } => "bad_request",
            ModelError::InvalidRequest(_) => "invalid_request",
            ModelError::Timeout(_) => "timeout",
            ModelError::InvalidResponse(_) => "invalid_response",
            ModelError::Transport(_) => "transport",
            ModelError::Cancelled => "cancelled",
            ModelError::Unavailable(_) => "unavailable",
        }
    }
}

/// A chat model: the one interface agents use to talk to any LLM.
///
/// A provider implements [`ChatModel::chat_stream`] — its one code path — and gets
/// [`ChatModel::chat`] as the collected form of the same stream, so the streamed and the whole
/// answer cannot differ. Implementations must be cancellation-safe: dropping the future of
/// either call, or the stream, stops generation and leaves the model usable and the caller's
/// conversation untouched (requests are taken by value).
#[async_trait]
pub trait ChatModel: Send + Sync + 'static {
    /// The model's name, window and capabilities.
    fn info(&self) -> ModelInfo;

    /// Answer one request as a stream of deltas (the one code path of every provider).
    ///
    /// The future resolves when the answer has started (errors before it — a refused request,
    /// an unreachable server — come from here); the stream then yields the deltas and ends
    /// with [`ModelDelta::Finished`](crate::ModelDelta::Finished) (and possibly the usage
    /// after it), or with an error.
    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError>;

    /// Answer one request whole: the collected form of [`ChatModel::chat_stream`].
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        collect_stream(self.chat_stream(request).await?).await
    }
}
