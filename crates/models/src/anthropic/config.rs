//! How an [`AnthropicModel`](super::AnthropicModel) reaches its server: base URL, key, model,
//! output cap, timeouts and retries.

use std::time::Duration;

use super::super::deadlines::DEFAULT_ATTEMPT_TIMEOUT;
use super::super::retry::RetryPolicy;

/// Anthropic's public endpoint (the Messages API is at `{base}/v1/messages`).
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Configuration of an [`AnthropicModel`](super::AnthropicModel).
#[derive(Clone)]
pub struct AnthropicConfig {
    /// Base URL up to and excluding `/v1/messages`, e.g. `https://api.anthropic.com` or a
    /// proxy's `http://127.0.0.1:4000` (a base that already ends in `/v1` is accepted too).
    pub base_url: String,
    /// The API key, sent as `x-api-key`; `None` sends none (a local proxy).
    pub api_key: Option<String>,
    /// The model name, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// The model's context window in tokens (reported by
    /// [`ChatModel::info`](troupe_protocol::ChatModel::info)).
    pub context_window: usize,
    /// `max_tokens` for requests that set none: the Messages API requires one.
    pub max_tokens: u32,
    /// How long to wait for the server's next sign of progress: the response's head, then each
    /// next event of the streamed answer (a gap, not a limit on the whole answer). SSE comments
    /// (keep-alives) are not progress; Anthropic's `ping` events are.
    pub request_timeout: Duration,
    /// The longest one attempt may take in all, from sending the request to the answer's last
    /// byte, however much keeps coming; a retry gets a deadline of its own. Default 600 s:
    /// the timeout Anthropic's own SDKs give a request.
    pub attempt_timeout: Duration,
    /// Retry policy for 429, 529 (overloaded), other 5xx, timeouts and connection failures.
    pub retry: RetryPolicy,
}

impl std::fmt::Debug for AnthropicConfig {
    // Hand-written so the key never lands in a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("context_window", &self.context_window)
            .field("max_tokens", &self.max_tokens)
            .field("request_timeout", &self.request_timeout)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

impl AnthropicConfig {
    /// A configuration for `model` at `base_url` with defaults for everything else: a
    /// 200,000-token window (every current Claude model's), 4096 output tokens.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        AnthropicConfig {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            api_key: None,
            model: model.into(),
            context_window: 200_000,
            max_tokens: 4096,
            request_timeout: Duration::from_secs(120),
            attempt_timeout: DEFAULT_ATTEMPT_TIMEOUT,
            retry: RetryPolicy::default(),
        }
    }

    /// From the environment: `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL` (default Anthropic's),
    /// `model` (Anthropic has no default model worth guessing), and optionally
    /// `ANTHROPIC_CONTEXT_WINDOW` (tokens).
    pub fn from_env(model: impl Into<String>) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let base_url = var("ANTHROPIC_BASE_URL").unwrap_or_else(|| ANTHROPIC_BASE_URL.to_string());
        let mut config = AnthropicConfig::new(base_url, model);
        // The `troupe` binary moves keys out of its environment into `credentials`.
        config.api_key =
            troupe_host::credentials::var("ANTHROPIC_API_KEY").filter(|v| !v.trim().is_empty());
        if let Some(window) = var("ANTHROPIC_CONTEXT_WINDOW").and_then(|v| v.parse().ok()) {
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

/// `{base}/v1/messages` (`{base}/messages` when the base already ends in `/v1`).
pub(super) fn messages_url(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}
