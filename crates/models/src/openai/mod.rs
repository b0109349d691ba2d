//! The OpenAI-compatible provider: OpenAI, Azure OpenAI, Ollama, vLLM, llama.cpp's server,
//! LM Studio — anything that speaks `POST {base}/chat/completions`.
//!
//! | server | base URL (`OPENAI_BASE_URL`) | key (`OPENAI_API_KEY`) | model (`OPENAI_MODEL`) |
//! |---|---|---|---|
//! | OpenAI | default (`https://api.openai.com/v1`) | required | e.g. `gpt-4o-mini` |
//! | Azure OpenAI (v1 API) | `https://<resource>.openai.azure.com/openai/v1` | required | the deployment name |
//! | Azure OpenAI (deployments) | use [`OpenAiConfig::azure`] (`api-key` header, `api-version`) | required | the deployment |
//! | Ollama | `http://localhost:11434/v1` | any / none | e.g. `llama3.2` |
//! | vLLM | `http://localhost:8000/v1` | the `--api-key` it was started with, if any | the served model |
//! | llama.cpp `llama-server` | `http://localhost:8080/v1` | the `--api-key`, if any | any (one model is served) |
//! | LM Studio | `http://localhost:1234/v1` | none | the loaded model's id |
//!
//! Set `OPENAI_CONTEXT_WINDOW` for models [`known_context_window`] does not know (local
//! servers especially), so compaction budgets against the real window.
//!
//! Answers are streamed (`stream: true`, the usage in the last chunk): server-sent events are
//! decoded into troupe's deltas as they arrive (`sse`, `chunk`, `stream`); a server that
//! ignores `stream` and answers with a whole `chat.completion` is accepted too (`wire`).
//! Failures before the answer starts are classified and retried by the
//! [`RetryPolicy`](super::RetryPolicy)
//! (`errors`); a streamed answer that breaks before its first delta is retried as well, one
//! that breaks after it is a typed error (its deltas were passed on: a retry would repeat
//! them).
//!
//! This is the only module that knows `async-openai` types. It uses them for the wire format
//! (request and response bodies) but does the HTTP itself with `reqwest`. Why not
//! `async_openai::Client`: its built-in retry layer retries 429/5xx on its own schedule (three
//! times, ignoring our policy), does not retry timeouts, and its error type keeps the status but
//! drops the `Retry-After` header — so neither "honour Retry-After" nor "retry timeouts with
//! backoff" nor "count attempts" can be done correctly on top of it. Owning the loop (a few dozen
//! lines) gets all three right and keeps one retry layer, not two stacked ones.

use async_trait::async_trait;
use reqwest::header::CONTENT_TYPE;
use troupe_protocol::{ChatModel, ChatRequest, ChatStream, ModelError, ModelInfo, stream_response};

mod chunk;
mod config;
mod errors;
mod wire;

pub use config::{
    AuthStyle, DEFAULT_OPENAI_MODEL, MaxTokensField, OPENAI_BASE_URL, OpenAiConfig,
    known_context_window,
};

use super::answer_limits::AnswerLimits;
use super::attempt::{
    AttemptError, first_delta, http_client, is_event_stream, send, whole_body, with_retries,
};
use super::deadlines::Deadlines;
use super::sse_answer::SseAnswer;
use chunk::ChunkDecoder;
use config::chat_completions_url;
use errors::classify_status;
use wire::{build_request, parse_response};

/// A chat model behind an OpenAI-compatible HTTP API.
///
/// ```no_run
/// # async fn demo() -> Result<(), troupe_protocol::ModelError> {
/// use troupe_models::{OpenAiConfig, OpenAiModel};
/// use troupe_protocol::{ChatMessage, ChatModel, ChatRequest};
/// let model = OpenAiModel::new(OpenAiConfig::new("http://localhost:11434/v1", "llama3.2"))?;
/// let answer = model.chat(ChatRequest::new(vec![ChatMessage::user("hi")])).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    config: OpenAiConfig,
    http: reqwest::Client,
    endpoint: String,
}

impl OpenAiModel {
    /// A provider with this configuration.
    ///
    /// # Errors
    /// [`ModelError::Transport`] when the HTTP client cannot be built (TLS setup).
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let http = http_client(config.request_timeout)?;
        let endpoint = chat_completions_url(&config.base_url);
        Ok(OpenAiModel {
            config,
            http,
            endpoint,
        })
    }

    /// A provider configured from the environment (see [`OpenAiConfig::from_env`]).
    ///
    /// # Errors
    /// As [`OpenAiModel::new`].
    pub fn from_env() -> Result<Self, ModelError> {
        OpenAiModel::new(OpenAiConfig::from_env())
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// One request: its answer as a stream once the first delta is in, or why not.
    async fn attempt(&self, body: &[u8], limits: AnswerLimits) -> Result<ChatStream, AttemptError> {
        let deadlines = Deadlines::start(self.config.request_timeout, self.config.attempt_timeout);
        let classify = |status, retry_after, bytes: &[u8]| {
            classify_status(status, retry_after, bytes, &self.config.model)
        };
        let (response, wait) = send(self.request(body), &deadlines, &classify).await?;
        if !is_event_stream(response.headers()) {
            // A server that ignores `stream: true` answers with the whole completion (older
            // compatible servers do): one text delta, then the calls, usage and finish.
            let bytes = whole_body(response, &wait, limits.body()).await?;
            let whole = parse_response(&bytes).map_err(AttemptError::fatal)?;
            return Ok(stream_response(whole, usize::MAX));
        }
        let answer = SseAnswer::new(response, deadlines, limits, ChunkDecoder::default());
        first_delta(answer).await
    }

    /// The POST of `body` with the configured auth, headers and query.
    fn request(&self, body: &[u8]) -> reqwest::RequestBuilder {
        let mut builder = self
            .http
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::ACCEPT,
                "text/event-stream, application/json",
            )
            .body(body.to_vec());
        if !self.config.query.is_empty() {
            builder = builder.query(&self.config.query);
        }
        if let Some(key) = &self.config.api_key {
            builder = match self.config.auth_style {
                AuthStyle::Bearer => builder.bearer_auth(key),
                AuthStyle::ApiKeyHeader => builder.header("api-key", key),
            };
        }
        if let Some(org) = &self.config.organization {
            builder = builder.header("OpenAI-Organization", org);
        }
        if let Some(project) = &self.config.project {
            builder = builder.header("OpenAI-Project", project);
        }
        builder
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: self.config.model.clone(),
            context_window: self.config.context_window,
            supports_tools: true,
        }
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let body = build_request(&self.config, &request)?;
        let body = serde_json::to_vec(&body)
            .map_err(|e| ModelError::InvalidRequest(format!("cannot encode the request: {e}")))?;
        let limits = AnswerLimits::new(request.max_tokens, self.config.context_window);
        with_retries(&self.config.retry, &self.config.model, || {
            self.attempt(&body, limits)
        })
        .await
    }
}
