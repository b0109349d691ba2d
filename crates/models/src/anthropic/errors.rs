//! Anthropic's failures as typed [`ModelError`]s: HTTP statuses with their error bodies
//! (`{"type": "error", "error": {"type": "overloaded_error", "message": …}}`), and the same
//! error objects when they arrive as a streamed `error` event.

use reqwest::StatusCode;
use serde::Deserialize;
use troupe_protocol::ModelError;

use super::super::attempt::AttemptError;
use super::super::retry::RetryAfter;

/// Anthropic's status for "overloaded": not standard HTTP, so not in `StatusCode`'s names.
const OVERLOADED: u16 = 529;

/// The error object of a failed call or an `error` event.
#[derive(Debug, Deserialize)]
pub(super) struct ApiError {
    #[serde(rename = "type", default)]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) message: String,
}

#[derive(Debug, Deserialize)]
struct Envelope {
    error: ApiError,
}

/// The error object in a body, if it has one.
pub(super) fn api_error(body: &[u8]) -> Option<ApiError> {
    serde_json::from_slice::<Envelope>(body)
        .ok()
        .map(|e| e.error)
}

/// Turn a non-2xx answer into a typed error, deciding whether it is worth another attempt:
/// 429, 529 (overloaded) and other 5xx are retried after the server's `Retry-After`.
pub(super) fn classify_status(
    status: StatusCode,
    retry_after: Option<RetryAfter>,
    body: &[u8],
    model: &str,
) -> AttemptError {
    let api = api_error(body);
    let (kind, message) = match api {
        Some(api) => (api.kind, api.message),
        None => (
            String::new(),
            String::from_utf8_lossy(body).chars().take(500).collect(),
        ),
    };
    let error = error_of(Some(status.as_u16()), &kind, message, model);
    let retryable = matches!(
        error,
        ModelError::RateLimited(_) | ModelError::Server { .. }
    );
    AttemptError {
        error,
        retryable,
        retry_after: retryable.then_some(retry_after).flatten(),
    }
}

/// The typed error for an Anthropic error `kind` and `message`, with the HTTP status when
/// there is one (a streamed `error` event has none).
pub(super) fn error_of(
    status: Option<u16>,
    kind: &str,
    message: String,
    model: &str,
) -> ModelError {
    let message = if kind.is_empty() {
        message
    } else {
        format!("{kind}: {message}")
    };
    match (status, kind) {
        (Some(OVERLOADED), _) | (None, "overloaded_error") => ModelError::Server {
            status: OVERLOADED,
            message,
        },
        (Some(429), _) | (None, "rate_limit_error") => ModelError::RateLimited(message),
        (Some(s), _) if (500..600).contains(&s) => ModelError::Server { status: s, message },
        (None, "api_error") => ModelError::Server {
            status: 500,
            message,
        },
        (Some(401 | 403), _) | (None, "authentication_error" | "permission_error") => {
            ModelError::Auth(message)
        }
        // "prompt is too long: 210000 tokens > 200000 maximum"; 413 is a request over the
        // size limit, which compaction cures the same way.
        _ if is_context_length_error(&message) || status == Some(413) => {
            ModelError::ContextLengthExceeded(message)
        }
        (Some(404), _) | (None, "not_found_error") => ModelError::UnknownModel(model.to_string()),
        (Some(status), _) => ModelError::BadRequest { status, message },
        (None, _) => ModelError::InvalidResponse(format!("the stream sent an error: {message}")),
    }
}

fn is_context_length_error(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("prompt is too long")
        || lower.contains("context window")
        || lower.contains("context length")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn classify(status: u16, body: &str) -> AttemptError {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT);
        let after = Some(RetryAfter::Wait(Duration::from_secs(1)));
        classify_status(status, after, body.as_bytes(), "m")
    }

    #[test]
    fn statuses_and_bodies_classify() {
        let overloaded = classify(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert!(
            matches!(overloaded.error, ModelError::Server { status: 529, .. }),
            "{:?}",
            overloaded.error
        );
        assert!(overloaded.retryable);
        assert_eq!(
            overloaded.retry_after,
            Some(RetryAfter::Wait(Duration::from_secs(1)))
        );
        let too_long = classify(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        );
        assert!(matches!(
            too_long.error,
            ModelError::ContextLengthExceeded(_)
        ));
        assert!(!too_long.retryable);
        assert!(matches!(classify(401, "nope").error, ModelError::Auth(_)));
        assert!(matches!(
            classify(
                404,
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: x"}}"#
            )
            .error,
            ModelError::UnknownModel(_)
        ));
        let bad = classify(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: bad"}}"#,
        );
        assert!(matches!(
            bad.error,
            ModelError::BadRequest { status: 400, .. }
        ));
        assert!(!bad.retryable && bad.retry_after.is_none());
    }

    #[test]
    fn streamed_error_events_classify_by_type() {
        let e = |kind: &str| error_of(None, kind, "m".to_string(), "model");
        assert!(matches!(
            e("overloaded_error"),
            ModelError::Server { status: 529, .. }
        ));
        assert!(matches!(e("rate_limit_error"), ModelError::RateLimited(_)));
        assert!(matches!(e("weird"), ModelError::InvalidResponse(_)));
    }
}
