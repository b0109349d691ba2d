//! A fault-injecting OpenAI-compatible server for provider tests.
//!
//! It serves `POST /v1/chat/completions` on 127.0.0.1 (random port), answers each request with
//! the next scripted [`Fault`] (a real `chat.completion` body, a streamed answer in server-sent
//! events, or a failure), and records every request body it received, so tests can count
//! attempts and check what was sent.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use troupe_models::{OpenAiConfig, OpenAiModel, RetryPolicy};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Fault {
    /// 200 with this `chat.completion` body.
    Ok(Value),
    /// 429, with this `Retry-After` header (seconds) if given.
    RateLimited { retry_after: Option<&'static str> },
    /// 429 with this `retry-after-ms` header (OpenAI's precise form, milliseconds).
    RateLimitedMs(&'static str),
    /// This 5xx status with an OpenAI error body.
    ServerError(u16),
    /// Wait this long, then answer 200 — longer than the client's timeout.
    Stall(Duration),
    /// 200 with a body that is not JSON.
    Malformed,
    /// 400 with `code: context_length_exceeded`, as OpenAI sends it.
    ContextLength,
    /// 401 with `code: invalid_api_key`.
    Unauthorized,
    /// 404 with `code: model_not_found`.
    ModelNotFound,
    /// 400 with an unrelated complaint.
    BadRequest,
    /// 200 `text/event-stream` with these raw body chunks, each written (and flushed) a few
    /// milliseconds after the one before, so the client reads them as separate network reads.
    Stream(Vec<Vec<u8>>),
    /// As [`Fault::Stream`], then the connection is cut (no end of the chunked body).
    StreamThenCut(Vec<Vec<u8>>),
    /// As [`Fault::Stream`], then the connection stays open and silent for 10 s.
    StreamThenStall(Vec<Vec<u8>>),
    /// As [`Fault::Stream`], with this pause before each chunk.
    StreamPaced(Vec<Vec<u8>>, Duration),
}

/// Pause between two streamed body chunks.
const CHUNK_GAP: Duration = Duration::from_millis(5);

/// How a streamed body ends.
#[derive(Clone, Copy)]
enum StreamEnd {
    Close,
    Cut,
    Stall,
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Fault>>,
    requests: Mutex<Vec<Value>>,
    auth: Mutex<Vec<Option<String>>>,
    queries: Mutex<Vec<Option<String>>>,
}

/// A running fault server; stops when dropped.
pub struct FaultServer {
    /// `http://127.0.0.1:<port>/v1`, to use as the provider's base URL.
    pub base_url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultServer {
    /// Start a server that plays `script`, one fault per request.
    pub async fn start(script: impl IntoIterator<Item = Fault>) -> FaultServer {
        let shared = Arc::new(Shared::default());
        shared.script.lock().unwrap().extend(script);
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FaultServer {
            base_url: format!("http://{addr}/v1"),
            shared,
            task,
        }
    }

    /// Every request body received, in order (one per attempt).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn attempts(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    /// The `Authorization` header of each request.
    pub fn auth_headers(&self) -> Vec<Option<String>> {
        self.shared.auth.lock().unwrap().clone()
    }

    /// The query string of each request (`api-version=…`), if it had one.
    pub fn queries(&self) -> Vec<Option<String>> {
        self.shared.queries.lock().unwrap().clone()
    }
}

fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: String,
) -> Response {
    // Speak the real protocol: a request that is not a chat completion request is refused.
    let request: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => {
            let body = error_body(
                &format!("invalid JSON body: {e}"),
                "invalid_request_error",
                None,
            );
            return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        }
    };
    if !request["model"].is_string() || !request["messages"].is_array() {
        let body = error_body(
            "`model` and `messages` are required",
            "invalid_request_error",
            None,
        );
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    shared.requests.lock().unwrap().push(request);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    shared.auth.lock().unwrap().push(auth);
    shared.queries.lock().unwrap().push(query);
    let fault = shared.script.lock().unwrap().pop_front();
    let Some(fault) = fault else {
        let body = error_body(
            "fault server: script exhausted",
            "invalid_request_error",
            None,
        );
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    };
    match fault {
        Fault::Ok(completion) => axum::Json(completion).into_response(),
        Fault::RateLimited { retry_after } => {
            let body = error_body(
                "Rate limit reached for requests",
                "requests",
                Some("rate_limit_exceeded"),
            );
            let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
            if let Some(seconds) = retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", seconds.parse().unwrap());
            }
            response
        }
        Fault::RateLimitedMs(millis) => {
            let body = error_body(
                "Rate limit reached for requests",
                "requests",
                Some("rate_limit_exceeded"),
            );
            let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
            response
                .headers_mut()
                .insert("retry-after-ms", millis.parse().unwrap());
            response
        }
        Fault::ServerError(status) => {
            let body = error_body(
                "The server had an error while processing your request.",
                "server_error",
                None,
            );
            (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
        }
        Fault::Stall(wait) => {
            tokio::time::sleep(wait).await;
            axum::Json(completion_text("too late")).into_response()
        }
        Fault::Malformed => (
            StatusCode::OK,
            [("content-type", "application/json")],
            r#"{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "mess"#,
        )
            .into_response(),
        Fault::ContextLength => {
            let body = error_body(
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
                "invalid_request_error",
                Some("context_length_exceeded"),
            );
            (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        }
        Fault::Unauthorized => {
            let body = error_body(
                "Incorrect API key provided: sk-test.",
                "invalid_request_error",
                Some("invalid_api_key"),
            );
            (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response()
        }
        Fault::ModelNotFound => {
            let body = error_body(
                "The model `gpt-nope` does not exist or you do not have access to it.",
                "invalid_request_error",
                Some("model_not_found"),
            );
            (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
        }
        Fault::BadRequest => {
            let body = error_body(
                "Invalid value for 'temperature'.",
                "invalid_request_error",
                None,
            );
            (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        }
        Fault::Stream(chunks) => event_stream(chunks, CHUNK_GAP, StreamEnd::Close),
        Fault::StreamThenCut(chunks) => event_stream(chunks, CHUNK_GAP, StreamEnd::Cut),
        Fault::StreamThenStall(chunks) => event_stream(chunks, CHUNK_GAP, StreamEnd::Stall),
        Fault::StreamPaced(chunks, gap) => event_stream(chunks, gap, StreamEnd::Close),
    }
}

/// A `text/event-stream` response writing `chunks` one by one, `gap` apart, then ending as
/// `end` says.
fn event_stream(chunks: Vec<Vec<u8>>, gap: Duration, end: StreamEnd) -> Response {
    let body = futures::stream::unfold(
        (chunks.into_iter(), Some(end)),
        move |(mut chunks, end)| async move {
            if let Some(chunk) = chunks.next() {
                tokio::time::sleep(gap).await;
                return Some((Ok::<_, std::io::Error>(chunk), (chunks, end)));
            }
            match end? {
                StreamEnd::Close => None,
                StreamEnd::Cut => Some((
                    Err(std::io::Error::other("fault server: connection cut")),
                    (chunks, None),
                )),
                StreamEnd::Stall => {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    None
                }
            }
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(axum::body::Body::from_stream(body))
        .unwrap()
}

/// One server-sent event carrying `chunk` (`data: {...}` and the blank line).
pub fn sse(chunk: &Value) -> Vec<u8> {
    format!("data: {chunk}\n\n").into_bytes()
}

/// The event that ends a stream.
pub const SSE_DONE: &[u8] = b"data: [DONE]\n\n";

/// A whole streamed body: these chunks as events, then `data: [DONE]`.
pub fn sse_body(chunks: &[Value]) -> Vec<u8> {
    let mut body: Vec<u8> = chunks.iter().flat_map(sse).collect();
    body.extend_from_slice(SSE_DONE);
    body
}

/// `body` cut into network chunks at these byte offsets.
pub fn split_at(body: &[u8], offsets: &[usize]) -> Vec<Vec<u8>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &offset in offsets {
        pieces.push(body[start..offset].to_vec());
        start = offset;
    }
    pieces.push(body[start..].to_vec());
    pieces
}

/// A `chat.completion.chunk` with this `delta` and finish reason, as OpenAI sends it.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        "usage": null
    })
}

/// The first chunk of an answer: the role, empty content.
pub fn chunk_role() -> Value {
    chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    )
}

/// A chunk with more text.
pub fn chunk_text(text: &str) -> Value {
    chunk(json!({"content": text}), None)
}

/// A chunk starting tool call `index`, with the first fragment of its arguments.
pub fn chunk_call_start(index: u32, id: &str, name: &str, arguments: &str) -> Value {
    chunk(
        json!({"tool_calls": [{"index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments}}]}),
        None,
    )
}

/// A chunk with more arguments of tool call `index`.
pub fn chunk_call_arguments(index: u32, arguments: &str) -> Value {
    chunk(
        json!({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}),
        None,
    )
}

/// The chunk that says why the model stopped.
pub fn chunk_finish(reason: &str) -> Value {
    chunk(json!({}), Some(reason))
}

/// The last chunk with `stream_options.include_usage`: no choices, the usage.
pub fn chunk_usage(prompt: u32, completion: u32) -> Value {
    json!({
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}
    })
}

/// A `chat.completion` body answering with text.
pub fn completion_text(text: &str) -> Value {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "system_fingerprint": "fp_test",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
    })
}

/// A `chat.completion` body answering with one tool call.
pub fn completion_tool_call(id: &str, name: &str, arguments: &str) -> Value {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments}
                }]
            },
            "logprobs": null,
            "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": 80, "completion_tokens": 12, "total_tokens": 92}
    })
}

/// The provider pointed at `server`, with short timeouts and backoffs.
pub(crate) fn model(server: &FaultServer) -> OpenAiModel {
    let config = OpenAiConfig::new(&server.base_url, "gpt-test")
        .with_api_key("sk-test")
        .with_request_timeout(Duration::from_millis(500))
        .with_retry(RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(5),
        });
    OpenAiModel::new(config).unwrap()
}
