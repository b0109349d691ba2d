//! One HTTP provider call as attempts: what a failed attempt is (the error, whether another
//! is worth it, the server's `Retry-After`), the retry loop around attempts under a
//! [`RetryPolicy`], and the small HTTP helpers every attempt needs. Shared by the
//! OpenAI-compatible and the Anthropic providers, so both retry the same way; each provider
//! only says how its statuses and bodies classify.

use std::future::Future;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use tokio::time::Instant;
use troupe_protocol::ModelError;

use super::answer_limits::BodyTooLarge;
use super::deadlines::{Deadlines, Wait};
use super::rate_limit;
use super::retry::{RetryAfter, RetryPolicy, parse_retry_after, parse_retry_after_ms};
use super::sse_answer::{EventDecoder, SseAnswer, StreamFault};

/// The most of a failure's body read to classify it: error objects are small, and what
/// follows the cap is not needed to tell one from another.
const ERROR_BODY_CAP: usize = 64 * 1024;

/// One failed attempt: the error to report if it is the last, and whether to try again.
#[derive(Debug)]
pub(super) struct AttemptError {
    pub(super) error: ModelError,
    pub(super) retryable: bool,
    pub(super) retry_after: Option<RetryAfter>,
}

impl AttemptError {
    pub(super) fn fatal(error: ModelError) -> Self {
        AttemptError {
            error,
            retryable: false,
            retry_after: None,
        }
    }

    /// The server did not answer in time: another attempt may find it awake.
    pub(super) fn timed_out(timeout: ModelError) -> Self {
        AttemptError {
            error: timeout,
            retryable: true,
            retry_after: None,
        }
    }

    pub(super) fn transport(e: reqwest::Error) -> Self {
        // Connection failures and dropped connections are retried: the request never produced
        // an answer. A body-decode failure is not a transport problem and never lands here.
        let retryable = e.is_connect() || e.is_request() || e.is_body() || e.is_timeout();
        AttemptError {
            error: ModelError::Transport(e.to_string()),
            retryable,
            retry_after: None,
        }
    }

    /// A streamed answer that failed before its first delta: interrupted (cut, stalled, out of
    /// time, an error event) it is retried — nothing was passed on, so another attempt cannot
    /// duplicate anything; malformed it is final, as the same request would get the same.
    pub(super) fn before_first_delta(fault: StreamFault) -> Self {
        match fault {
            StreamFault::Interrupted(error) => AttemptError {
                error,
                retryable: true,
                retry_after: None,
            },
            StreamFault::Malformed(error) => AttemptError::fatal(error),
        }
    }
}

/// Run `attempt` until it succeeds, fails for good, or `policy` says stop; the last failure's
/// error is the call's.
pub(super) async fn with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    model: &str,
    mut attempt: F,
) -> Result<T, ModelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let mut retry = 0;
    loop {
        let failure = match attempt().await {
            Ok(done) => return Ok(done),
            Err(failure) => failure,
        };
        // A server's Retry-After is about the endpoint, not this caller: under a shared rate
        // limit everyone calling it waits (a wait the policy cannot honour is refused below,
        // and speaks for nobody else either).
        if let Some(RetryAfter::Wait(after)) = failure.retry_after
            && after <= policy.max_retry_after
        {
            rate_limit::hold_endpoint(after);
        }
        if !failure.retryable || retry >= policy.max_retries {
            return Err(failure.error);
        }
        let wait = match policy.wait(retry, failure.retry_after) {
            Ok(wait) => wait,
            Err(refused) => return Err(refused.explain(failure.error)),
        };
        tracing::warn!(
            model = %model,
            attempt = retry + 1,
            wait_ms = wait.as_millis() as u64,
            error = %failure.error,
            "model call failed; retrying"
        );
        rate_limit::before_retry(wait).await;
        retry += 1;
    }
}

/// `retry-after-ms` (OpenAI's precise form) or `Retry-After` in seconds.
pub(super) fn retry_after(headers: &HeaderMap) -> Option<RetryAfter> {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    header("retry-after-ms")
        .and_then(parse_retry_after_ms)
        .or_else(|| header(RETRY_AFTER.as_str()).and_then(parse_retry_after))
}

/// Whether the server answered with server-sent events.
pub(super) fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// A whole non-streamed answer's body, read by the end of `wait` (a server that sends its head
/// and then stalls times out too) and refused past `cap` bytes.
pub(super) async fn whole_body(
    response: reqwest::Response,
    wait: &Wait,
    cap: usize,
) -> Result<Vec<u8>, AttemptError> {
    match read_body(response, wait, cap).await? {
        (body, true) => Ok(body),
        (_, false) => Err(AttemptError::fatal(ModelError::InvalidResponse(
            BodyTooLarge { cap }.to_string(),
        ))),
    }
}

/// Up to `cap` bytes of a body, by the end of `wait`, and whether that was all of it (what
/// follows the cap is never read).
async fn read_body(
    mut response: reqwest::Response,
    wait: &Wait,
    cap: usize,
) -> Result<(Vec<u8>, bool), AttemptError> {
    let read = async {
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(AttemptError::transport)? {
            let room = cap - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                return Ok((body, false));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((body, true))
    };
    wait.run(read).await.map_err(AttemptError::timed_out)?
}

/// How a provider reads a failure status and its body (with the server's `Retry-After`).
pub(super) type ClassifyStatus<'a> =
    &'a (dyn Fn(reqwest::StatusCode, Option<RetryAfter>, &[u8]) -> AttemptError + Sync);

/// Sends `request` and waits, within `deadlines`, for a success status: a failure status is
/// read (its first [`ERROR_BODY_CAP`] bytes, by the same wait) and classified by the provider.
/// Returns the response and the wait a whole body is read within.
pub(super) async fn send(
    request: reqwest::RequestBuilder,
    deadlines: &Deadlines,
    classify: ClassifyStatus<'_>,
) -> Result<(reqwest::Response, Wait), AttemptError> {
    let wait = deadlines.wait_from(Instant::now());
    let response = match wait.run(request.send()).await {
        Err(timeout) => return Err(AttemptError::timed_out(timeout)),
        Ok(Err(e)) => return Err(AttemptError::transport(e)),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if status.is_success() {
        return Ok((response, wait));
    }
    let retry_after = retry_after(response.headers());
    let (bytes, _) = read_body(response, &wait, ERROR_BODY_CAP).await?;
    Err(classify(status, retry_after, &bytes))
}

/// The first bytes of a body that is not what was asked for, to quote in an error.
pub(super) async fn body_start(
    response: reqwest::Response,
    wait: &Wait,
) -> Result<Vec<u8>, AttemptError> {
    Ok(read_body(response, wait, ERROR_BODY_CAP).await?.0)
}

/// The answer as a stream once its first delta is in — before it, a failure is another
/// attempt's business; after it, the stream reports its own errors.
pub(super) async fn first_delta<D: EventDecoder>(
    mut answer: SseAnswer<D>,
) -> Result<troupe_protocol::ChatStream, AttemptError> {
    match answer.next().await {
        Some(Ok(first)) => Ok(super::DeltaReader::into_stream(answer, first)),
        Some(Err(fault)) => Err(AttemptError::before_first_delta(fault)),
        None => Err(AttemptError::before_first_delta(StreamFault::Interrupted(
            ModelError::InvalidResponse("the stream ended without an answer".to_string()),
        ))),
    }
}

/// The HTTP client a provider sends its attempts with: the process's TLS provider installed,
/// and a connect timeout of the attempt's timeout, at most 30 s.
pub(super) fn http_client(request_timeout: Duration) -> Result<reqwest::Client, ModelError> {
    troupe_host::tls::install_crypto_provider();
    reqwest::Client::builder()
        .connect_timeout(request_timeout.min(Duration::from_secs(30)))
        .build()
        .map_err(|e| ModelError::Transport(format!("cannot build the HTTP client: {e}")))
}
