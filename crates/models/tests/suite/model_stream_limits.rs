//! Streamed answers no provider takes whole, against servers speaking the real wire formats
//! (`model_fault_server` for OpenAI's, `anthropic_server` for Anthropic's): a line, an event or
//! an answer past its cap, and a stream that is malformed rather than cut off — each a typed
//! error naming what was wrong, and never retried (the same server would answer the same).
//!
//! The caps follow the request's `max_tokens` with a floor: these tests ask for 16 tokens, so
//! they meet the floor (256 KiB of answer; a line or an event may hold all of it escaped, six
//! bytes a byte, and its envelope).

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use troupe_models::{AnthropicConfig, AnthropicModel, OpenAiConfig, OpenAiModel, RetryPolicy};
use troupe_protocol::{ChatMessage, ChatModel, ChatRequest, ModelDelta, ModelError};

use super::support::anthropic_server::{AnthropicServer, Reply, event};
use super::support::model_fault_server::{
    Fault, FaultServer, chunk_finish, chunk_role, chunk_text, sse, sse_body,
};

/// More than any cap these tests meet: 2 MiB.
const PAST_EVERY_CAP: usize = 2 << 20;

/// Retries allowed, so a test can see that none was made.
fn retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(5),
    }
}

fn openai(server: &FaultServer) -> OpenAiModel {
    let config = OpenAiConfig::new(&server.base_url, "gpt-test")
        .with_request_timeout(Duration::from_secs(5))
        .with_retry(retry());
    OpenAiModel::new(config).unwrap()
}

fn anthropic(server: &AnthropicServer) -> AnthropicModel {
    let config = AnthropicConfig::new(&server.base_url, "claude-test")
        .with_request_timeout(Duration::from_secs(5))
        .with_retry(retry());
    AnthropicModel::new(config).unwrap()
}

/// A request for at most 16 tokens: its caps are the floor.
fn request() -> ChatRequest {
    let mut request = ChatRequest::new(vec![ChatMessage::user("Name Norway's capital.")]);
    request.max_tokens = Some(16);
    request
}

/// The second answer every server is scripted with: a retry would get it.
fn good_answer() -> Fault {
    Fault::Stream(vec![sse_body(&[chunk_text("Oslo."), chunk_finish("stop")])])
}

/// `body` in 64 KiB network writes.
fn writes(body: &[u8]) -> Vec<Vec<u8>> {
    body.chunks(64 * 1024).map(<[u8]>::to_vec).collect()
}

fn is_invalid_naming(result: &Result<impl std::fmt::Debug, ModelError>, words: &[&str]) -> bool {
    matches!(result, Err(ModelError::InvalidResponse(m)) if words.iter().all(|w| m.contains(w)))
}

#[tokio::test]
async fn model_stream_a_line_past_its_cap_is_refused_naming_it_and_never_retried() {
    // One `data:` line that never ends: the reader must not keep it all to find its end.
    let mut line = br#"data: {"choices": [{"index": 0, "delta": {"content": ""#.to_vec();
    line.resize(PAST_EVERY_CAP, b'x');
    let server = FaultServer::start([Fault::Stream(writes(&line)), good_answer()]).await;
    let result = openai(&server).chat(request()).await;
    assert!(is_invalid_naming(&result, &["line", "cap"]), "{result:?}");
    assert_eq!(server.attempts(), 1, "a malformed stream was retried");
}

#[tokio::test]
async fn model_stream_an_event_past_its_cap_is_refused_naming_it_and_never_retried() {
    // `data:` lines of 1 KiB each and no blank line: one event that never ends.
    let line = format!("data: {}\n", "x".repeat(1024));
    let body = line.repeat(PAST_EVERY_CAP / line.len() + 1).into_bytes();
    let server = FaultServer::start([Fault::Stream(writes(&body)), good_answer()]).await;
    let result = openai(&server).chat(request()).await;
    assert!(is_invalid_naming(&result, &["event", "cap"]), "{result:?}");
    assert_eq!(server.attempts(), 1, "a malformed stream was retried");
}

#[tokio::test]
async fn model_stream_a_malformed_event_before_the_answer_is_never_retried() {
    let server = FaultServer::start([
        Fault::Stream(vec![sse(&chunk_role()), b"data: {\"choi\n\n".to_vec()]),
        good_answer(),
    ])
    .await;
    let result = openai(&server).chat(request()).await;
    assert!(is_invalid_naming(&result, &["not JSON"]), "{result:?}");
    assert_eq!(server.attempts(), 1, "a malformed stream was retried");
}

/// Text deltas of 16 KiB each, more in all than the answer cap: the deltas under the cap are
/// passed on, then the stream ends with the error naming the cap.
#[tokio::test]
async fn model_stream_an_openai_answer_past_its_cap_ends_naming_the_cap() {
    let piece = "y".repeat(16 * 1024);
    let mut chunks = vec![chunk_role()];
    chunks.extend((0..PAST_EVERY_CAP / piece.len()).map(|_| chunk_text(&piece)));
    chunks.push(chunk_finish("stop"));
    let server =
        FaultServer::start([Fault::Stream(writes(&sse_body(&chunks))), good_answer()]).await;
    let mut stream = openai(&server).chat_stream(request()).await.unwrap();
    let mut text = 0;
    let mut error = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(ModelDelta::Text(t)) => text += t.len(),
            Ok(_) => {}
            Err(e) => error = Some(e),
        }
    }
    let error: Result<(), _> = error.map_or(Ok(()), Err);
    assert!(is_invalid_naming(&error, &["answer", "cap"]), "{error:?}");
    assert!(
        text > 0 && text < PAST_EVERY_CAP,
        "{text} bytes of text passed on"
    );
    assert_eq!(server.attempts(), 1);
}

/// One `text_delta` event larger than the answer cap (but under the event cap): refused as
/// the answer past its cap, before its text is passed on.
#[tokio::test]
async fn model_stream_an_anthropic_answer_past_its_cap_is_refused_naming_the_cap() {
    let text = "z".repeat(PAST_EVERY_CAP / 4);
    let mut body = Vec::new();
    for e in [
        json!({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 16}}),
        json!({"type": "message_stop"}),
    ] {
        body.extend(event(&e));
    }
    let server = AnthropicServer::start([Reply::Raw(body), Reply::text("Oslo.")]).await;
    let result = anthropic(&server).chat(request()).await;
    assert!(is_invalid_naming(&result, &["answer", "cap"]), "{result:?}");
    assert_eq!(server.attempts(), 1, "an answer past its cap was retried");
}
