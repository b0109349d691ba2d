//! How an [`OpenAiModel`](super::OpenAiModel) reaches its server: base URL, key, model,
//! timeouts, retries, and the context windows of well-known models.

use std::time::Duration;

use super::super::deadlines::DEFAULT_ATTEMPT_TIMEOUT;
use super::super::retry::RetryPolicy;

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

/// Configuration of an [`OpenAiModel`](super::OpenAiModel).
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
    /// The model's context window in tokens (reported by
    /// [`ChatModel::info`](troupe_protocol::ChatModel::info)).
    pub context_window: usize,
    /// `OpenAI-Organization` header.
    pub organization: Option<String>,
    /// `OpenAI-Project` header.
    pub project: Option<String>,
    /// Query parameters appended to every request (Azure's `api-version`).
    pub query: Vec<(String, String)>,
    /// How long to wait for the server's next sign of progress: the response's head, then each
    /// next event of a streamed answer — a gap, not a limit on the whole answer. SSE comments
    /// (keep-alives) are not progress: a server that sends only them has gone quiet. A whole
    /// (non-streamed) JSON body must arrive within it.
    pub request_timeout: Duration,
    /// The longest one attempt may take in all, from sending the request to the answer's last
    /// byte, however much keeps coming; a retry gets a deadline of its own. Default 600 s:
    /// the timeout OpenAI's and Anthropic's own SDKs give a request, long enough for a long
    /// answer of a slow reasoning model.
    pub attempt_timeout: Duration,
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
            .field("attempt_timeout", &self.attempt_timeout)
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
            attempt_timeout: DEFAULT_ATTEMPT_TIMEOUT,
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
        // The `troupe` binary moves keys out of its environment into `credentials`.
        config.api_key =
            troupe_host::credentials::var("OPENAI_API_KEY").filter(|v| !v.trim().is_empty());
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

    /// This configuration with a request timeout (the longest wait for progress).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// This configuration with an attempt timeout (the longest one attempt may take in all).
    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
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
pub(super) fn chat_completions_url(base_url: &str) -> String {
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
