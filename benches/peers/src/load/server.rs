//! The model every framework talks to: `POST /v1/chat/completions` on 127.0.0.1 in OpenAI's
//! wire format, answering after a fixed delay and streaming (server-sent events; a request with
//! `stream: false` gets a whole `chat.completion`).
//!
//! It is stateless: a request whose messages hold no tool result is answered with two tool
//! calls (`weather` and `local_time`, both for Paris), one that holds them with the final
//! answer, streamed in pieces. It keeps only counts — requests served, refused, and when the
//! first request of the current run arrived (the child's cold start ends there).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::{FINAL_ANSWER, TIME_TOOL, TOOL_ARGUMENTS, WEATHER_TOOL};

/// Characters per streamed piece of the final answer.
const PIECE: usize = 8;

/// What the server has seen.
#[derive(Default)]
struct Shared {
    delay_ms: AtomicU64,
    served: AtomicUsize,
    refused: AtomicUsize,
    first_arrival: Mutex<Option<Instant>>,
}

/// A running server; its task ends with the runtime that runs it.
pub struct LoadServer {
    /// `http://127.0.0.1:PORT/v1`: the base URL every client is given.
    pub base_url: String,
    shared: Arc<Shared>,
}

impl LoadServer {
    /// Bind 127.0.0.1 on a free port (a backlog deep enough for 1 000 connections at once)
    /// and serve on the current runtime.
    pub async fn start() -> std::io::Result<LoadServer> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind("127.0.0.1:0".parse().map_err(std::io::Error::other)?)?;
        let listener = socket.listen(4096)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(Arc::clone(&shared));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(LoadServer {
            base_url: format!("http://{addr}/v1"),
            shared,
        })
    }

    /// Start a run: every answer waits `delay` first; the first arrival is forgotten.
    pub fn begin_run(&self, delay: Duration) {
        self.shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
        *self
            .shared
            .first_arrival
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// When the run's first request arrived.
    pub fn first_arrival(&self) -> Option<Instant> {
        *self
            .shared
            .first_arrival
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Requests answered, and requests refused as not speaking the protocol.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.shared.served.load(Ordering::Relaxed),
            self.shared.refused.load(Ordering::Relaxed),
        )
    }
}

fn refuse(shared: &Shared, why: String) -> Response {
    shared.refused.fetch_add(1, Ordering::Relaxed);
    let body = json!({"error": {"message": why, "type": "invalid_request_error", "param": null, "code": null}});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

async fn chat_completions(State(shared): State<Arc<Shared>>, body: String) -> Response {
    let arrived = Instant::now();
    shared
        .first_arrival
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert(arrived);
    let request: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => return refuse(&shared, format!("invalid JSON body: {e}")),
    };
    let Some(messages) = request["messages"].as_array() else {
        return refuse(&shared, "`messages` is required".into());
    };
    if !request["model"].is_string() {
        return refuse(&shared, "`model` is required".into());
    }
    let answered_tools = messages.iter().any(|m| m["role"] == "tool");
    if !answered_tools && request["tools"].as_array().is_none_or(|t| t.len() < 2) {
        return refuse(&shared, "the agent must offer both tools".into());
    }
    let stream = request["stream"].as_bool().unwrap_or(false);
    let usage = request["stream_options"]["include_usage"]
        .as_bool()
        .unwrap_or(false);
    let prompt_tokens = (body.len() / 4) as u64;
    let delay = shared.delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep_until((arrived + Duration::from_millis(delay)).into()).await;
    }
    shared.served.fetch_add(1, Ordering::Relaxed);
    let reply = if answered_tools {
        Reply::Text
    } else {
        Reply::ToolCalls
    };
    if stream {
        let events = reply.events(prompt_tokens, usage);
        let body = Body::from_stream(futures::stream::iter(
            events.into_iter().map(Ok::<_, Infallible>),
        ));
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(body)
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    } else {
        axum::Json(reply.completion(prompt_tokens)).into_response()
    }
}

/// What the server answers.
#[derive(Clone, Copy)]
enum Reply {
    /// Call both tools.
    ToolCalls,
    /// The final answer.
    Text,
}

const ID: &str = "chatcmpl-load";

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": ID, "object": "chat.completion.chunk", "created": 0, "model": super::MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

fn usage(prompt_tokens: u64, completion_tokens: u64) -> Value {
    json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
           "total_tokens": prompt_tokens + completion_tokens})
}

fn calls() -> [(&'static str, &'static str); 2] {
    [("call_weather", WEATHER_TOOL), ("call_time", TIME_TOOL)]
}

impl Reply {
    /// The streamed answer: one SSE event per body chunk, `[DONE]` last.
    fn events(self, prompt_tokens: u64, with_usage: bool) -> Vec<String> {
        let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        let (finish, completion_tokens) = match self {
            Reply::ToolCalls => {
                let (head, tail) = TOOL_ARGUMENTS.split_at(TOOL_ARGUMENTS.len() / 2);
                for (index, (id, name)) in calls().into_iter().enumerate() {
                    chunks.push(chunk(
                        json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                               "function": {"name": name, "arguments": ""}}]}),
                        None,
                    ));
                    for part in [head, tail] {
                        chunks.push(chunk(
                            json!({"tool_calls": [{"index": index, "function": {"arguments": part}}]}),
                            None,
                        ));
                    }
                }
                ("tool_calls", 24)
            }
            Reply::Text => {
                let chars: Vec<char> = FINAL_ANSWER.chars().collect();
                for piece in chars.chunks(PIECE) {
                    let piece: String = piece.iter().collect();
                    chunks.push(chunk(json!({"content": piece}), None));
                }
                ("stop", FINAL_ANSWER.len() as u64 / 4)
            }
        };
        chunks.push(chunk(json!({}), Some(finish)));
        if with_usage {
            chunks.push(json!({
                "id": ID, "object": "chat.completion.chunk", "created": 0, "model": super::MODEL,
                "choices": [], "usage": usage(prompt_tokens, completion_tokens),
            }));
        }
        let mut events: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        events.push("data: [DONE]\n\n".to_string());
        events
    }

    /// The whole answer, for a request that does not stream.
    fn completion(self, prompt_tokens: u64) -> Value {
        let (message, finish, completion_tokens) = match self {
            Reply::ToolCalls => (
                json!({"role": "assistant", "content": null, "tool_calls": calls().into_iter().map(|(id, name)| json!({
                    "id": id, "type": "function", "function": {"name": name, "arguments": TOOL_ARGUMENTS}
                })).collect::<Vec<_>>()}),
                "tool_calls",
                24,
            ),
            Reply::Text => (
                json!({"role": "assistant", "content": FINAL_ANSWER}),
                "stop",
                FINAL_ANSWER.len() as u64 / 4,
            ),
        };
        json!({
            "id": ID, "object": "chat.completion", "created": 0, "model": super::MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage(prompt_tokens, completion_tokens),
        })
    }
}
