//! Which failures of an OpenAI-compatible call are final and which are worth another attempt:
//! HTTP statuses and error bodies become typed [`ModelError`]s, with the server's
//! `Retry-After`.

use async_openai::error::{ApiError, WrappedError};
use reqwest::StatusCode;
use troupe_protocol::ModelError;

use super::super::attempt::AttemptError;
use super::super::retry::RetryAfter;

/// Turn a non-2xx answer into a typed error, deciding whether it is worth another attempt.
pub(super) fn classify_status(
    status: StatusCode,
    retry_after: Option<RetryAfter>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
