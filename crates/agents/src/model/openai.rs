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
//! This is the only module that knows `async-openai` types. It uses them for the wire format
//! (request and response bodies) but does the HTTP itself with `reqwest`. Why not
//! `async_openai::Client`: its built-in retry layer retries 429/5xx on its own schedule (three
//! times, ignoring our policy), does not retry timeouts, and its error type keeps the status but
//! drops the `Retry-After` header — so neither "honour Retry-After" nor "retry timeouts with
//! backoff" nor "count attempts" can be done correctly on top of it. Owning the loop (a few dozen
//! lines) gets all three right and keeps one retry layer, not two stacked ones.

use std::time::Duration;

use async_openai::error::{ApiError, WrappedError};
use async_openai::types::chat::{
    ChatCompletionMessageToolCalls, ChatCompletionNamedToolChoice, ChatCompletionRequestMessage,
    ChatCompletionTool, ChatCompletionToolChoiceOption, ChatCompletionTools,
    CreateChatCompletionRequest, CreateChatCompletionResponse, FunctionName, FunctionObject,
    ToolChoiceOptions,
};
use async_trait::async_trait;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;
use troupe_runtime::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, FinishReason, ModelError, ModelInfo,
    ToolCall, ToolChoice, Usage,
};

use super::retry::{RetryPolicy, parse_retry_after, parse_retry_after_ms};

/// OpenAI's public endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used when none is configured.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";

/// How the API key is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthStyle {
    /// `Authorization: Bearer <key>` (OpenAI and every compatible server).
    #[default]
    Bearer,
    /// `api-key: <key>` (Azure OpenAI's deployment endpoints).
    ApiKeyHeader,
}

/// Which request field carries the output-token cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_completion_tokens`: required by OpenAI's reasoning models.
    MaxCompletionTokens,
    /// `max_tokens`: the legacy field every compatible server understands.
    MaxTokens,
}

/// Configuration of an [`OpenAiModel`].
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL up to and excluding `/chat/completions`, e.g. `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1` (Ollama), `http://localhost:8000/v1` (vLLM),
    /// `http://localhost:8080/v1` (llama.cpp server), `http://localhost:1234/v1` (LM Studio).
    /// A query in it (`…/v1?api-version=2024-06-01`) stays after the path and is sent with
    /// every request, as are [`OpenAiConfig::query`]'s parameters.
    pub base_url: String,
    /// The API key; `None` sends no auth header (local servers).
    pub api_key: Option<String>,
    /// How the key is sent.
    pub auth_style: AuthStyle,
    /// The model (or Azure deployment) name.
    pub model: String,
    /// The model's context window in tokens (reported by [`ChatModel::info`]).
    pub context_window: usize,
    /// `OpenAI-Organization` header.
    pub organization: Option<String>,
    /// `OpenAI-Project` header.
    pub project: Option<String>,
    /// Query parameters appended to every request (Azure's `api-version`).
    pub query: Vec<(String, String)>,
    /// Timeout of one attempt, from sending the request to the last byte of the answer.
    pub request_timeout: Duration,
    /// Retry policy for 429, 5xx, timeouts and connection failures.
    pub retry: RetryPolicy,
    /// Which field carries `max_tokens`.
    pub max_tokens_field: MaxTokensField,
}

impl std::fmt::Debug for OpenAiConfig {
    // Hand-written so the key never lands in a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("auth_style", &self.auth_style)
            .field("model", &self.model)
            .field("context_window", &self.context_window)
            .field("organization", &self.organization)
            .field("project", &self.project)
            .field("query", &self.query)
            .field("request_timeout", &self.request_timeout)
            .field("retry", &self.retry)
            .field("max_tokens_field", &self.max_tokens_field)
            .finish()
    }
}

impl OpenAiConfig {
    /// A configuration for `model` at `base_url` with defaults for everything else.
    ///
    /// The context window defaults to what [`known_context_window`] says for the model name.
    /// `max_tokens` is sent as `max_completion_tokens` to api.openai.com and as `max_tokens`
    /// elsewhere, because older compatible servers only know the legacy field.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let base_url = base_url.into().trim_end_matches('/').to_string();
        let model = model.into();
        let max_tokens_field = if base_url.starts_with(OPENAI_BASE_URL) {
            MaxTokensField::MaxCompletionTokens
        } else {
            MaxTokensField::MaxTokens
        };
        OpenAiConfig {
            context_window: known_context_window(&model),
            base_url,
            api_key: None,
            auth_style: AuthStyle::Bearer,
            model,
            organization: None,
            project: None,
            query: Vec::new(),
            request_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
            max_tokens_field,
        }
    }

    /// Azure OpenAI's deployment endpoint:
    /// `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=…` with an
    /// `api-key` header. (Azure's newer `/openai/v1` endpoint is plain OpenAI-compatible: use
    /// [`OpenAiConfig::new`] with it and the deployment name as the model.)
    pub fn azure(
        endpoint: &str,
        deployment: impl Into<String>,
        api_version: impl Into<String>,
        api_key: impl Into<String>,
    ) -> Self {
        let deployment = deployment.into();
        let base = format!(
            "{}/openai/deployments/{deployment}",
            endpoint.trim_end_matches('/')
        );
        let mut config = OpenAiConfig::new(base, deployment);
        config.api_key = Some(api_key.into());
        config.auth_style = AuthStyle::ApiKeyHeader;
        config
            .query
            .push(("api-version".to_string(), api_version.into()));
        config.max_tokens_field = MaxTokensField::MaxCompletionTokens;
        config
    }

    /// From the environment: `OPENAI_API_KEY`, `OPENAI_BASE_URL` (default OpenAI's),
    /// `OPENAI_MODEL` (default `gpt-4o-mini`), and optionally `OPENAI_ORG_ID`,
    /// `OPENAI_PROJECT_ID` and `OPENAI_CONTEXT_WINDOW` (tokens).
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let base_url = var("OPENAI_BASE_URL").unwrap_or_else(|| OPENAI_BASE_URL.to_string());
        let model = var("OPENAI_MODEL").unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_string());
        let mut config = OpenAiConfig::new(base_url, model);
        config.api_key = var("OPENAI_API_KEY");
        config.organization = var("OPENAI_ORG_ID");
        config.project = var("OPENAI_PROJECT_ID");
        if let Some(window) = var("OPENAI_CONTEXT_WINDOW").and_then(|v| v.parse().ok()) {
            config.context_window = window;
        }
        config
    }

    /// This configuration with an API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// This configuration with a context window.
    pub fn with_context_window(mut self, tokens: usize) -> Self {
        self.context_window = tokens;
        self
    }

    /// This configuration with a per-attempt timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// This configuration with a retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
}

/// The context window of well-known OpenAI models; 8192 for names it does not know (a
/// conservative guess: compaction then starts early instead of overflowing a small model).
pub fn known_context_window(model: &str) -> usize {
    let m = model.to_ascii_lowercase();
    let table: &[(&str, usize)] = &[
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4", 200_000),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-4", 8_192),
    ];
    table
        .iter()
        .find(|(prefix, _)| m.starts_with(prefix))
        .map_or(8_192, |(_, window)| *window)
}

/// `{base}/chat/completions`, with the path inserted before a query the base URL carries
/// (`https://x.openai.azure.com/openai/deployments/d?api-version=2024-06-01`), which is kept;
/// a fragment is never sent, so it is dropped.
fn chat_completions_url(base_url: &str) -> String {
    let without_fragment = base_url.split_once('#').map_or(base_url, |(url, _)| url);
    match without_fragment.split_once('?') {
        Some((path, query)) if !query.is_empty() => {
            format!("{}/chat/completions?{query}", path.trim_end_matches('/'))
        }
        Some((path, _)) => format!("{}/chat/completions", path.trim_end_matches('/')),
        None => format!(
            "{}/chat/completions",
            without_fragment.trim_end_matches('/')
        ),
    }
}

/// A chat model behind an OpenAI-compatible HTTP API.
///
/// ```no_run
/// # async fn demo() -> Result<(), troupe_runtime::ModelError> {
/// use troupe_agents::model::openai::{OpenAiConfig, OpenAiModel};
/// use troupe_runtime::{ChatMessage, ChatModel, ChatRequest};
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
        let http = reqwest::Client::builder()
            .connect_timeout(config.request_timeout.min(Duration::from_secs(30)))
            .build()
            .map_err(|e| ModelError::Transport(format!("cannot build the HTTP client: {e}")))?;
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

    async fn attempt(&self, body: &[u8]) -> Result<ChatResponse, AttemptError> {
        let mut builder = self
            .http
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
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
        // One timeout around send *and* body read: a server that sends headers and then stalls
        // must time out too.
        let exchange = async {
            let response = builder.send().await?;
            let status = response.status();
            let retry_after = retry_after(response.headers());
            let bytes = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, retry_after, bytes))
        };
        let (status, retry_after, bytes) =
            match tokio::time::timeout(self.config.request_timeout, exchange).await {
                Err(_) => return Err(AttemptError::timeout(self.config.request_timeout)),
                Ok(Err(e)) => return Err(AttemptError::transport(e)),
                Ok(Ok(parts)) => parts,
            };
        if status.is_success() {
            return parse_response(&bytes).map_err(AttemptError::fatal);
        }
        Err(classify_status(
            status,
            retry_after,
            &bytes,
            &self.config.model,
        ))
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

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        let body = build_request(&self.config, &request)?;
        let body = serde_json::to_vec(&body)
            .map_err(|e| ModelError::InvalidRequest(format!("cannot encode the request: {e}")))?;
        let mut retry = 0;
        loop {
            let failure = match self.attempt(&body).await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            if !failure.retryable || retry >= self.config.retry.max_retries {
                return Err(failure.error);
            }
            let Some(wait) = self.config.retry.delay(retry, failure.retry_after) else {
                return Err(failure.error);
            };
            tracing::warn!(
                model = %self.config.model,
                attempt = retry + 1,
                wait_ms = wait.as_millis() as u64,
                error = %failure.error,
                "model call failed; retrying"
            );
            tokio::time::sleep(wait).await;
            retry += 1;
        }
    }
}

/// One failed attempt: the error to report if it is the last, and whether to try again.
#[derive(Debug)]
struct AttemptError {
    error: ModelError,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl AttemptError {
    fn fatal(error: ModelError) -> Self {
        AttemptError {
            error,
            retryable: false,
            retry_after: None,
        }
    }

    fn timeout(limit: Duration) -> Self {
        AttemptError {
            error: ModelError::Timeout(limit.as_secs().max(1)),
            retryable: true,
            retry_after: None,
        }
    }

    fn transport(e: reqwest::Error) -> Self {
        // Connection failures and dropped connections are retried: the request never produced
        // an answer. A body-decode failure is not a transport problem and never lands here.
        let retryable = e.is_connect() || e.is_request() || e.is_body() || e.is_timeout();
        AttemptError {
            error: ModelError::Transport(e.to_string()),
            retryable,
            retry_after: None,
        }
    }
}

/// `retry-after-ms` (OpenAI's precise form) or `Retry-After` in seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    header("retry-after-ms")
        .and_then(parse_retry_after_ms)
        .or_else(|| header(RETRY_AFTER.as_str()).and_then(parse_retry_after))
}

/// Turn a non-2xx answer into a typed error, deciding whether it is worth another attempt.
fn classify_status(
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
    model: &str,
) -> AttemptError {
    let api = serde_json::from_slice::<WrappedError>(body)
        .ok()
        .map(|w| w.error);
    let message = api.as_ref().map_or_else(
        || String::from_utf8_lossy(body).chars().take(500).collect(),
        ApiError::to_string,
    );
    let kind = api
        .as_ref()
        .and_then(|a| a.r#type.clone())
        .unwrap_or_default();
    let code = status.as_u16();
    let fatal = AttemptError::fatal;
    match status {
        StatusCode::TOO_MANY_REQUESTS if code_is(&api, "insufficient_quota") => {
            fatal(ModelError::RateLimited(message))
        }
        StatusCode::TOO_MANY_REQUESTS => AttemptError {
            error: ModelError::RateLimited(message),
            retryable: true,
            retry_after,
        },
        s if s.is_server_error() => AttemptError {
            error: ModelError::Server {
                status: code,
                message,
            },
            retryable: true,
            retry_after,
        },
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => fatal(ModelError::Auth(message)),
        _ if is_context_length_error(&api, &kind, &message)
            || status == StatusCode::PAYLOAD_TOO_LARGE =>
        {
            fatal(ModelError::ContextLengthExceeded(message))
        }
        StatusCode::NOT_FOUND => fatal(ModelError::UnknownModel(model.to_string())),
        _ if code_is(&api, "model_not_found") => fatal(ModelError::UnknownModel(model.to_string())),
        _ => fatal(ModelError::BadRequest {
            status: code,
            message,
        }),
    }
}

fn code_is(api: &Option<ApiError>, wanted: &str) -> bool {
    api.as_ref().and_then(|a| a.code.as_deref()) == Some(wanted)
}

/// OpenAI says `code: context_length_exceeded`; vLLM and others only say it in words
/// ("This model's maximum context length is 4096 tokens…"); llama.cpp's server uses the type
/// `exceed_context_size_error`.
fn is_context_length_error(api: &Option<ApiError>, kind: &str, message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    code_is(api, "context_length_exceeded")
        || kind == "exceed_context_size_error"
        || lower.contains("context_length_exceeded")
        || lower.contains("maximum context length")
        || lower.contains("context length")
        || lower.contains("exceeds the available context size")
}

/// troupe's request → the wire request. Messages go through their serde form, which is exactly
/// the OpenAI message JSON, into async-openai's typed messages.
fn build_request(
    config: &OpenAiConfig,
    request: &ChatRequest,
) -> Result<CreateChatCompletionRequest, ModelError> {
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let value = serde_json::to_value(m).map_err(|e| (i, e.to_string()))?;
            serde_json::from_value::<ChatCompletionRequestMessage>(value)
                .map_err(|e| (i, e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|(i, e)| {
            ModelError::InvalidRequest(format!("message {i} is not a valid chat message: {e}"))
        })?;
    let tools: Vec<ChatCompletionTools> = request
        .tools
        .iter()
        .map(|t| {
            ChatCompletionTools::Function(ChatCompletionTool {
                function: FunctionObject {
                    name: t.name.clone(),
                    description: Some(t.description.clone()).filter(|d| !d.is_empty()),
                    parameters: Some(t.parameters.clone()),
                    strict: None,
                },
            })
        })
        .collect();
    // tool_choice is only meaningful with tools; some servers reject it otherwise.
    let tool_choice = (!tools.is_empty()).then(|| match &request.tool_choice {
        ToolChoice::Auto => ChatCompletionToolChoiceOption::Mode(ToolChoiceOptions::Auto),
        ToolChoice::None => ChatCompletionToolChoiceOption::Mode(ToolChoiceOptions::None),
        ToolChoice::Required => ChatCompletionToolChoiceOption::Mode(ToolChoiceOptions::Required),
        ToolChoice::Named(name) => {
            ChatCompletionToolChoiceOption::Function(ChatCompletionNamedToolChoice {
                function: FunctionName { name: name.clone() },
            })
        }
    });
    let mut wire = CreateChatCompletionRequest {
        model: config.model.clone(),
        messages,
        tools: (!tools.is_empty()).then_some(tools),
        tool_choice,
        temperature: request.temperature,
        ..Default::default()
    };
    match config.max_tokens_field {
        MaxTokensField::MaxCompletionTokens => wire.max_completion_tokens = request.max_tokens,
        #[allow(deprecated)]
        MaxTokensField::MaxTokens => wire.max_tokens = request.max_tokens,
    }
    Ok(wire)
}

/// The wire response → troupe's response.
///
/// Compatible servers are looser than OpenAI: some omit `id`/`created`/`object`, some invent
/// finish reasons. Those fields are normalised on the JSON before the typed parse, and the raw
/// finish reason is kept, so a server's quirk is not a failed call.
fn parse_response(bytes: &[u8]) -> Result<ChatResponse, ModelError> {
    let snippet = || {
        String::from_utf8_lossy(bytes)
            .chars()
            .take(200)
            .collect::<String>()
    };
    let mut value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ModelError::InvalidResponse(format!("not JSON ({e}): {}", snippet())))?;
    let Some(object) = value.as_object_mut() else {
        return Err(ModelError::InvalidResponse(format!(
            "not a JSON object: {}",
            snippet()
        )));
    };
    for (key, default) in [("id", ""), ("model", ""), ("object", "chat.completion")] {
        object.entry(key).or_insert_with(|| Value::from(default));
    }
    object.entry("created").or_insert_with(|| Value::from(0));
    let raw_finish = object
        .get("choices")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("finish_reason"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(choice) = object.get_mut("choices").and_then(|c| c.get_mut(0))
        && let Some(reason) = choice.get_mut("finish_reason")
    {
        *reason = Value::Null;
    }
    let wire: CreateChatCompletionResponse = serde_json::from_value(value).map_err(|e| {
        ModelError::InvalidResponse(format!("unexpected shape ({e}): {}", snippet()))
    })?;
    let Some(choice) = wire.choices.into_iter().next() else {
        return Err(ModelError::InvalidResponse(
            "the response has no choices".to_string(),
        ));
    };
    let calls: Vec<ToolCall> = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| match call {
            ChatCompletionMessageToolCalls::Function(f) => {
                ToolCall::new(f.id, f.function.name, f.function.arguments)
            }
            ChatCompletionMessageToolCalls::Custom(c) => {
                ToolCall::new(c.id, c.custom_tool.name, c.custom_tool.input)
            }
        })
        .collect();
    let mut message = if calls.is_empty() {
        ChatMessage::assistant(choice.message.content.unwrap_or_default())
    } else {
        ChatMessage::assistant_tool_calls(choice.message.content, calls)
    };
    if let Some(refusal) = choice.message.refusal {
        message
            .extra
            .insert("refusal".to_string(), Value::String(refusal));
    }
    let finish_reason = match raw_finish.as_deref() {
        None | Some("stop") => {
            if message.has_tool_calls() {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            }
        }
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_string()),
    };
    let usage = wire.usage.map_or_else(Usage::default, |u| Usage {
        input_tokens: u64::from(u.prompt_tokens),
        output_tokens: u64::from(u.completion_tokens),
    });
    Ok(ChatResponse {
        message,
        usage,
        finish_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_runtime::ToolDefinition;

    #[test]
    fn request_carries_messages_tools_and_choice_in_wire_shape() {
        let config = OpenAiConfig::new("http://x/v1", "m");
        let call = ToolCall::new("c1", "add", r#"{"a":1}"#);
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system("s"),
                ChatMessage::user("u"),
                ChatMessage::assistant_tool_calls(None, vec![call]),
                ChatMessage::tool_result("c1", "2"),
            ],
            tools: vec![ToolDefinition {
                name: "add".into(),
                description: "adds".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::Named("add".into()),
            temperature: Some(0.5),
            max_tokens: Some(7),
        };
        let wire = build_request(&config, &request).map(|w| serde_json::to_value(w).ok());
        let wire = wire.ok().flatten().unwrap_or_default();
        assert_eq!(
            wire["messages"][2]["tool_calls"][0]["function"]["name"],
            "add"
        );
        assert_eq!(wire["messages"][3]["tool_call_id"], "c1");
        assert_eq!(wire["tools"][0]["type"], "function");
        assert_eq!(wire["tool_choice"]["function"]["name"], "add");
        assert_eq!(wire["max_tokens"], 7);
    }

    #[test]
    fn context_length_is_recognised_by_code_or_words() {
        let by_code = br#"{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let by_words = br#"{"error":{"message":"This model's maximum context length is 4096 tokens","type":"BadRequestError","param":null,"code":null}}"#;
        for body in [&by_code[..], &by_words[..]] {
            let e = classify_status(StatusCode::BAD_REQUEST, None, body, "m");
            assert!(
                matches!(e.error, ModelError::ContextLengthExceeded(_)),
                "{:?}",
                e.error
            );
            assert!(!e.retryable);
        }
    }
}
