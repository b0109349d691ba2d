//! The native Anthropic provider against a server speaking the real Messages wire format
//! (`anthropic_server`): streamed answers, troupe's cache marks and the cache usage they earn,
//! and the error paths. Through an agent (tool use, the chat span, a typed ask): troupe-agents'
//! `anthropic_agent.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use troupe_models::{RateLimit, RateLimitedModel};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, FinishReason, MessageKind, ModelDelta, ModelError,
};

use super::support::anthropic_server::{AnthropicServer, KEY, Reply, event, model};

fn request() -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("What is the capital of Norway?"),
    ])
}

fn marked(block: &Value) -> bool {
    block.get("cache_control") == Some(&json!({"type": "ephemeral"}))
}

#[tokio::test]
async fn model_anthropic_streams_an_answer_with_headers_system_and_cache_usage() {
    let server = AnthropicServer::start([Reply::text("Oslo is the capital.")]).await;
    let mut stream = model(&server).chat_stream(request()).await.unwrap();
    let mut deltas = Vec::new();
    while let Some(delta) = stream.next().await {
        deltas.push(delta.unwrap());
    }
    let texts: Vec<_> = deltas
        .iter()
        .filter_map(|d| match d {
            ModelDelta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Oslo is th", "e capital."], "streamed in pieces");
    assert!(deltas.contains(&ModelDelta::Finished(FinishReason::Stop)));
    let usage = deltas.iter().find_map(|d| match d {
        ModelDelta::Usage(u) => Some(*u),
        _ => None,
    });
    let usage = usage.expect("usage");
    assert!(usage.cache_creation_input_tokens > 0, "{usage:?}");
    assert_eq!(usage.cache_read_input_tokens, 0, "{usage:?}");
    assert_eq!(usage.output_tokens, 5);

    let received = &server.received()[0];
    assert_eq!(received.api_key.as_deref(), Some(KEY));
    assert_eq!(received.version.as_deref(), Some("2023-06-01"));
    let body = &received.body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["system"][0]["text"], "You are terse.");
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(marked(&body["system"][0]), "{body}");
    assert!(marked(&body["messages"][0]["content"][0]), "{body}");
}

#[tokio::test]
async fn model_anthropic_marks_sit_after_system_summary_previous_turn_and_last() {
    let server = AnthropicServer::start([Reply::text("ok")]).await;
    let request = ChatRequest::new(vec![
        ChatMessage::system("rules"),
        ChatMessage::user("Summary of earlier work").with_kind(MessageKind::Summary),
        ChatMessage::assistant("noted"),
        ChatMessage::user("first question"),
        ChatMessage::assistant("first answer"),
        ChatMessage::user("second question"),
    ]);
    model(&server).chat(request).await.unwrap();
    let body = &server.received()[0].body;
    let messages = body["messages"].as_array().unwrap();
    let marks: Vec<(usize, usize)> = messages
        .iter()
        .enumerate()
        .flat_map(|(m, message)| {
            let blocks = message["content"].as_array().cloned().unwrap_or_default();
            blocks
                .iter()
                .enumerate()
                .filter(|(_, b)| marked(b))
                .map(|(b, _)| (m, b))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(marked(&body["system"][0]), "after the system prompt");
    // The summary (message 0), the previous turn's end (message 3, "first answer") and the
    // last block (message 4).
    assert_eq!(marks, vec![(0, 0), (3, 0), (4, 0)], "{body}");
    assert_eq!(messages[3]["content"][0]["text"], "first answer");
}

fn status(
    status: u16,
    kind: &'static str,
    message: &'static str,
    retry_after: Option<&'static str>,
) -> Reply {
    Reply::Status {
        status,
        kind,
        message,
        retry_after,
    }
}

#[tokio::test]
async fn model_anthropic_overloaded_529_is_retried() {
    let server = AnthropicServer::start([
        status(529, "overloaded_error", "Overloaded", None),
        Reply::text("Oslo."),
    ])
    .await;
    let answer = model(&server).chat(request()).await.unwrap();
    assert_eq!(answer.message.text(), "Oslo.");
    assert_eq!(server.attempts(), 2);
}

#[tokio::test]
async fn model_anthropic_429_waits_for_retry_after() {
    let started = Instant::now();
    let server = AnthropicServer::start([
        status(
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
            Some("1"),
        ),
        Reply::text("Oslo."),
    ])
    .await;
    let answer = model(&server).chat(request()).await.unwrap();
    assert_eq!(answer.message.text(), "Oslo.");
    assert_eq!(server.attempts(), 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retry-after: 1 was not honoured"
    );
}

/// As the OpenAI provider's: a `retry-after` no policy can honour is the server's typed error
/// saying so, never a panic and never a retry on a made-up backoff.
#[tokio::test]
async fn model_anthropic_an_absurd_retry_after_is_a_typed_error_not_a_panic() {
    for asked in ["1e20", "inf", "NaN", "-5"] {
        let server = AnthropicServer::start([
            status(
                429,
                "rate_limit_error",
                "Number of requests has exceeded your rate limit",
                Some(asked),
            ),
            Reply::text("Oslo."),
        ])
        .await;
        let result = model(&server).chat(request()).await;
        assert!(
            matches!(&result, Err(ModelError::RateLimited(m)) if m.contains("no wait")),
            "{asked}: {result:?}"
        );
        assert_eq!(server.attempts(), 1, "{asked}");
    }
}

#[tokio::test]
async fn model_anthropic_prompt_too_long_is_context_length_exceeded_and_final() {
    let server = AnthropicServer::start([status(
        400,
        "invalid_request_error",
        "prompt is too long: 214119 tokens > 200000 maximum",
        None,
    )])
    .await;
    let result = model(&server).chat(request()).await;
    assert!(
        matches!(&result, Err(ModelError::ContextLengthExceeded(m)) if m.contains("prompt is too long")),
        "{result:?}"
    );
    assert_eq!(server.attempts(), 1);
}

#[tokio::test]
async fn model_anthropic_401_is_an_auth_error_that_never_shows_the_key() {
    let server = AnthropicServer::start([status(
        401,
        "authentication_error",
        "invalid x-api-key",
        None,
    )])
    .await;
    let model = model(&server);
    let result = model.chat(request()).await;
    assert!(matches!(&result, Err(ModelError::Auth(_))), "{result:?}");
    assert_eq!(server.attempts(), 1);
    let shown = format!("{result:?} {:?}", model.config());
    assert!(!shown.contains(KEY), "{shown}");
}

/// A malformed event is not a cut-off answer: the same request would get the same, so it is
/// never retried, before the answer started or after.
#[tokio::test]
async fn model_anthropic_malformed_event_is_never_retried_and_after_text_is_an_error() {
    let broken = b"event: message_start\ndata: {\"type\": \"message_start\", \"mess\n\n".to_vec();
    let server = AnthropicServer::start([Reply::Raw(broken), Reply::text("Oslo.")]).await;
    let result = model(&server).chat(request()).await;
    assert!(
        matches!(&result, Err(ModelError::InvalidResponse(m)) if m.contains("not a Messages event")),
        "{result:?}"
    );
    assert_eq!(server.attempts(), 1, "a malformed stream was retried");

    // Once text went out, a broken event ends the stream with a typed error; what came
    // before it was delivered.
    let mut body = Vec::new();
    for e in [
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Os"}}),
    ] {
        body.extend(event(&e));
    }
    body.extend_from_slice(b"event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\"}}\n\n");
    let server = AnthropicServer::start([Reply::Raw(body)]).await;
    let mut stream = model(&server).chat_stream(request()).await.unwrap();
    assert_eq!(stream.next().await, Some(Ok(ModelDelta::Text("Os".into()))));
    let error = stream.next().await;
    assert!(
        matches!(&error, Some(Err(ModelError::InvalidResponse(m))) if m.contains("not a Messages event")),
        "{error:?}"
    );
    assert_eq!(stream.next().await, None);
}

#[tokio::test]
async fn model_anthropic_a_stream_cut_before_its_stop_is_an_error() {
    let mut body = Vec::new();
    for e in [
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Os"}}),
    ] {
        body.extend(event(&e));
    }
    let server = AnthropicServer::start([Reply::Raw(body)]).await;
    let result = model(&server)
        .chat_stream(request())
        .await
        .unwrap()
        .collect::<Vec<_>>()
        .await;
    assert!(
        matches!(result.last(), Some(Err(ModelError::InvalidResponse(m))) if m.contains("before the answer was complete")),
        "{result:?}"
    );
}

/// Anthropic's prompt is its three input counts added up: counts that add past `u64` saturate
/// (a debug build panicked, a release build wrapped to a tiny count that the budget, the cost
/// and a shared rate limit then believed), and a rate limit settling such an answer's usage
/// does not overflow either.
#[tokio::test]
async fn model_anthropic_usage_past_u64_saturates_instead_of_wrapping() {
    let huge = u64::MAX;
    let mut body = Vec::new();
    for e in [
        json!({"type": "message_start", "message": {"id": "m", "usage": {
            "input_tokens": huge, "cache_read_input_tokens": 5,
            "cache_creation_input_tokens": 7, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Oslo."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": huge}}),
        json!({"type": "message_stop"}),
    ] {
        body.extend(event(&e));
    }
    let server = AnthropicServer::start(vec![Reply::Raw(body); 3]).await;
    // A limit as large as the counts: each answer settles to all of it, and the minute's sum
    // of three such answers is past `u64` too — with no wait for room, as it always fits.
    let limit = RateLimit::per_minute(None, Some(u64::MAX)).unwrap();
    let limited = RateLimitedModel::new(Arc::new(model(&server)), limit);
    for _ in 0..3 {
        let answer = limited.chat(request()).await.unwrap();
        assert_eq!(answer.message.text(), "Oslo.");
        assert_eq!(answer.usage.input_tokens, u64::MAX);
        assert_eq!(answer.usage.output_tokens, u64::MAX);
        assert_eq!(
            (
                answer.usage.cache_read_input_tokens,
                answer.usage.cache_creation_input_tokens
            ),
            (5, 7)
        );
    }
}
