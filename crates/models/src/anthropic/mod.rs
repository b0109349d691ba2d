//! The native Anthropic provider: Claude through the Messages API (`POST {base}/v1/messages`),
//! with prompt caching placed by troupe. The only module that knows the Messages wire types.
//!
//! | what | how |
//! |---|---|
//! | key | `x-api-key` from `ANTHROPIC_API_KEY` (never logged: [`AnthropicConfig`]'s `Debug` redacts it) |
//! | server | `ANTHROPIC_BASE_URL`, default `https://api.anthropic.com` (a proxy such as LiteLLM's works too) |
//! | version | `anthropic-version: 2023-06-01` |
//! | answers | streamed server-sent events (`events`), read by the same reader as OpenAI's |
//! | cache | `cache_control` marks where `anthropic_breakpoints` says (`wire`) |
//! | usage | `cache_read_input_tokens` / `cache_creation_input_tokens` in [`Usage`](troupe_protocol::Usage) |
//! | typed asks | the `response_format`'s schema as a forced answer tool, its input read back as the answer's text |
//!
//! Failures before the answer starts are classified (`errors`: 429 and 529 "overloaded" and
//! other 5xx retried after `Retry-After`, "prompt is too long" is
//! [`ModelError::ContextLengthExceeded`] so emergency compaction runs, 401/403 are
//! [`ModelError::Auth`]) and retried by the same loop as the OpenAI-compatible provider's; a
//! stream that breaks before its first delta is retried too, one that breaks after it is a
//! typed error.

use async_trait::async_trait;
use reqwest::header::CONTENT_TYPE;
use troupe_protocol::{ChatModel, ChatRequest, ChatStream, ModelError, ModelInfo};

mod config;
mod errors;
mod events;
mod wire;

pub use config::{ANTHROPIC_BASE_URL, ANTHROPIC_VERSION, AnthropicConfig};

use super::answer_limits::AnswerLimits;
use super::attempt::{
    AttemptError, body_start, first_delta, http_client, is_event_stream, send, with_retries,
};
use super::deadlines::Deadlines;
use super::sse_answer::SseAnswer;
use config::messages_url;
use errors::classify_status;
use events::EventsDecoder;
use wire::{AnswerTool, build_request};

/// A Claude model behind the Anthropic Messages API.
///
/// ```no_run
/// # async fn demo() -> Result<(), troupe_protocol::ModelError> {
/// use troupe_models::{AnthropicConfig, AnthropicModel};
/// use troupe_protocol::{ChatMessage, ChatModel, ChatRequest};
/// let model = AnthropicModel::new(AnthropicConfig::from_env("claude-sonnet-4-5"))?;
/// let answer = model.chat(ChatRequest::new(vec![ChatMessage::user("hi")])).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    config: AnthropicConfig,
    http: reqwest::Client,
    endpoint: String,
}

impl AnthropicModel {
    /// A provider with this configuration.
    ///
    /// # Errors
    /// [`ModelError::Transport`] when the HTTP client cannot be built (TLS setup).
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let http = http_client(config.request_timeout)?;
        let endpoint = messages_url(&config.base_url);
        Ok(AnthropicModel {
            config,
            http,
            endpoint,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    /// One request: its answer as a stream once the first delta is in, or why not.
    async fn attempt(
        &self,
        body: &[u8],
        answer_tool: &Option<AnswerTool>,
        limits: AnswerLimits,
    ) -> Result<ChatStream, AttemptError> {
        let deadlines = Deadlines::start(self.config.request_timeout, self.config.attempt_timeout);
        let classify = |status, retry_after, bytes: &[u8]| {
            classify_status(status, retry_after, bytes, &self.config.model)
        };
        let (response, wait) = send(self.request(body), &deadlines, &classify).await?;
        if !is_event_stream(response.headers()) {
            // Every request asks for a stream; a server that answers otherwise is not one troupe
            // can read.
            let bytes = body_start(response, &wait).await?;
            return Err(AttemptError::fatal(ModelError::InvalidResponse(format!(
                "expected a streamed answer (text/event-stream), got: {}",
                super::shorten(&String::from_utf8_lossy(&bytes), 200)
            ))));
        }
        let decoder = EventsDecoder::new(&self.config.model, answer_tool.clone());
        first_delta(SseAnswer::new(response, deadlines, limits, decoder)).await
    }

    /// The POST of `body` with the key and version headers.
    fn request(&self, body: &[u8]) -> reqwest::RequestBuilder {
        let mut builder = self
            .http
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .header("anthropic-version", ANTHROPIC_VERSION)
            .body(body.to_vec());
        if let Some(key) = &self.config.api_key {
            builder = builder.header("x-api-key", key);
        }
        builder
    }
}

#[async_trait]
impl ChatModel for AnthropicModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: self.config.model.clone(),
            context_window: self.config.context_window,
            supports_tools: true,
        }
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let (body, answer_tool) = build_request(&self.config, &request);
        let body = serde_json::to_vec(&body)
            .map_err(|e| ModelError::InvalidRequest(format!("cannot encode the request: {e}")))?;
        // The Messages API always has a `max_tokens`: the request's or the configuration's.
        let max_tokens = request.max_tokens.unwrap_or(self.config.max_tokens);
        let limits = AnswerLimits::new(Some(max_tokens), self.config.context_window);
        with_retries(&self.config.retry, &self.config.model, || {
            self.attempt(&body, &answer_tool, limits)
        })
        .await
    }
}
