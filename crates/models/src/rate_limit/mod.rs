//! Shared rate limits: requests and tokens per minute for one model endpoint, counted once for
//! every agent and the compression agent that call it.
//!
//! [`RateLimitedModel`] wraps the model a team builds once per endpoint and hands to all its
//! agents (the configuration's `[models.NAME]`), so one limit covers every call to it:
//! - callers wait in one line, first come first served, until a sliding minute has room for
//!   one more request and for the request's tokens (its prompt, estimated, plus its output
//!   cap), then settle to the answer's real usage;
//! - a `Retry-After` the server answers one caller with holds the whole line until then (the
//!   provider's retry loop tells the limiter of the call it runs in), and the retry itself
//!   takes a turn in line.

mod limiter;
mod window;

use std::num::{NonZeroU32, NonZeroU64};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use troupe_protocol::{ChatModel, ChatRequest, ChatResponse, ChatStream, ModelError, ModelInfo};
use troupe_tokens::{CharEstimateCounter, TokenCounter};

pub(crate) use limiter::{before_retry, hold_endpoint};

use super::observed_stream::{StreamObserver, observe};
use limiter::{CallMet, Limiter};
use window::{Ticket, Window};

/// The output a request without `max_tokens` is reserved for: what compaction keeps free for an
/// answer by default (one number for both).
const DEFAULT_OUTPUT_RESERVE: u64 = troupe_tokens::DEFAULT_OUTPUT_RESERVE as u64;

/// Requests and tokens per minute one endpoint allows; a limit left out is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests per sliding minute.
    pub requests_per_minute: Option<NonZeroU32>,
    /// Tokens (prompt and output) per sliding minute.
    pub tokens_per_minute: Option<NonZeroU64>,
}

/// A rate limit that cannot be: zero per minute would never let a request through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateLimitError {
    /// A limit of zero.
    #[error("{what} must be at least 1 (leave it out for no limit)")]
    Zero {
        /// `requests_per_minute` or `tokens_per_minute`.
        what: &'static str,
    },
}

impl RateLimit {
    /// A limit of `requests` and `tokens` per minute (`None`: no limit of that kind).
    ///
    /// # Errors
    /// [`RateLimitError::Zero`] for a limit of zero, naming which.
    pub fn per_minute(requests: Option<u32>, tokens: Option<u64>) -> Result<Self, RateLimitError> {
        let requests_per_minute = match requests {
            None => None,
            Some(n) => Some(NonZeroU32::new(n).ok_or(RateLimitError::Zero {
                what: "requests_per_minute",
            })?),
        };
        let tokens_per_minute = match tokens {
            None => None,
            Some(n) => Some(NonZeroU64::new(n).ok_or(RateLimitError::Zero {
                what: "tokens_per_minute",
            })?),
        };
        Ok(RateLimit {
            requests_per_minute,
            tokens_per_minute,
        })
    }
}

/// What a shared limit did so far: worth a line in a report (`/context`, an example).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimitStats {
    /// Requests let through (retries included).
    pub requests: u64,
    /// Of those, the ones that had to wait for their turn.
    pub waited: u64,
    /// The longest any one waited.
    pub longest_wait: Duration,
    /// `Retry-After` answers that held every caller.
    pub holds: u64,
}

/// A model whose calls share one [`RateLimit`]: clone it (or share the `Arc<dyn ChatModel>`
/// holding it) to every agent and the compression agent calling the same endpoint.
#[derive(Clone)]
pub struct RateLimitedModel {
    inner: Arc<dyn ChatModel>,
    limiter: Arc<Limiter>,
}

impl RateLimitedModel {
    /// `inner`, its calls limited to `limit`.
    pub fn new(inner: Arc<dyn ChatModel>, limit: RateLimit) -> Self {
        RateLimitedModel {
            inner,
            limiter: Arc::new(Limiter::new(Window::new(limit))),
        }
    }

    /// What the limit did so far, for every caller together.
    pub fn stats(&self) -> RateLimitStats {
        self.limiter.stats()
    }
}

#[async_trait]
impl ChatModel for RateLimitedModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let met = Arc::new(CallMet::default());
        let tokens = estimated_tokens(&request);
        let (ticket, stream) = self
            .limiter
            .scope(&met, async {
                let ticket = self.limiter.admit(tokens).await;
                (ticket, self.inner.chat_stream(request).await)
            })
            .await;
        // Inside the call's `chat` span: the waits and holds of this call, failed or not.
        met.record_on(&tracing::Span::current());
        // An error keeps the reservation: the server may have counted what it refused.
        let stream = stream?;
        let settle = Settle {
            limiter: Arc::clone(&self.limiter),
            ticket,
        };
        Ok(observe(stream, Box::new(settle), tracing::Span::current()))
    }
}

/// A request's tokens before it is sent: its prompt at four bytes a token (no tokenizer is
/// needed for a reservation the answer's usage corrects) and its output cap.
fn estimated_tokens(request: &ChatRequest) -> u64 {
    let counter = CharEstimateCounter;
    let messages: usize = request
        .messages
        .iter()
        .map(|m| counter.count_message_upper_bound(m).unwrap_or_default())
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| (t.name.len() + t.description.len() + t.parameters.to_string().len()).div_ceil(4))
        .sum();
    let output = request.max_tokens.map_or(DEFAULT_OUTPUT_RESERVE, u64::from);
    (messages + tools) as u64 + output
}

/// Settles a call's reservation to the usage its answer reports.
struct Settle {
    limiter: Arc<Limiter>,
    ticket: Ticket,
}

impl StreamObserver for Settle {
    fn finished(self: Box<Self>, outcome: &Result<ChatResponse, ModelError>) {
        // A provider that reports no usage (or an answer that broke) keeps the estimate.
        if let Ok(response) = outcome {
            // Saturating: a provider's counts are its word, not a promise they add up.
            let used = response
                .usage
                .input_tokens
                .saturating_add(response.usage.output_tokens);
            if used > 0 {
                self.limiter.settle(self.ticket, used);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use troupe_protocol::ChatMessage;

    use super::*;

    #[test]
    fn a_limit_of_zero_is_refused_naming_which() {
        assert_eq!(
            RateLimit::per_minute(Some(0), Some(10)),
            Err(RateLimitError::Zero {
                what: "requests_per_minute"
            })
        );
        let err = RateLimit::per_minute(None, Some(0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tokens_per_minute must be at least 1 (leave it out for no limit)"
        );
        assert_eq!(RateLimit::per_minute(None, None), Ok(RateLimit::default()));
    }

    /// On the real clock: the time a free line takes to enter is not reported as a wait.
    #[tokio::test]
    async fn calls_with_room_to_spare_never_count_as_waiting() {
        let inner = Arc::new(crate::ScriptedModel::new("m", []).with_fallback("ok"));
        let model = RateLimitedModel::new(inner, RateLimit::per_minute(Some(100), None).unwrap());
        for _ in 0..3 {
            let answer = model
                .chat(ChatRequest::new([ChatMessage::user("hi")]))
                .await;
            assert_eq!(answer.unwrap().message.text(), "ok");
        }
        let stats = model.stats();
        assert_eq!((stats.requests, stats.waited), (3, 0), "{stats:?}");
    }

    #[test]
    fn a_request_reserves_its_prompt_and_its_output_cap() {
        let text = "x".repeat(400);
        let mut request = ChatRequest::new([ChatMessage::user(text)]);
        let prompt = estimated_tokens(&request) - DEFAULT_OUTPUT_RESERVE;
        // 400 bytes at four a token, and the message's framing.
        assert!((100..120).contains(&prompt), "{prompt}");
        request.max_tokens = Some(50);
        assert_eq!(estimated_tokens(&request), prompt + 50);
    }
}
