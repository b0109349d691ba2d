//! A fault-injecting Anthropic Messages server for provider tests.
//!
//! It serves `POST /v1/messages` on 127.0.0.1 (random port) in the real wire format: each
//! request is checked as the API checks it (`model`, `max_tokens`, `messages`, the
//! `anthropic-version` header, at most 4 `cache_control` marks), answered with the next
//! scripted [`Reply`] — a streamed answer as Messages server-sent events, an error status with
//! Anthropic's error body, or raw bytes — and recorded, with its headers.
//!
//! Its prompt cache works the way Anthropic's does, so a test can see a second turn read what
//! the first wrote: the prompt is the tools, then the system blocks, then the messages'
//! blocks; each block carrying `cache_control` ends a prefix that is written to the cache;
//! a request reads the longest marked prefix already cached (`cache_read_input_tokens`), writes
//! the rest up to its last mark (`cache_creation_input_tokens`), and pays `input_tokens` for
//! what follows its last mark. A block's tokens are its JSON's length / 4.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use troupe_models::{AnthropicConfig, AnthropicModel, RetryPolicy};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A streamed answer: this text (sent in two `text_delta`s), then these tool calls (id,
    /// name, arguments JSON, sent in two `input_json_delta`s); the stop reason follows from
    /// them.
    Answer {
        text: String,
        calls: Vec<(String, String, String)>,
    },
    /// This status with Anthropic's error body of this type and message, and a `retry-after`
    /// header if given.
    Status {
        status: u16,
        kind: &'static str,
        message: &'static str,
        retry_after: Option<&'static str>,
    },
    /// 200 `text/event-stream` with this body, as is.
    Raw(Vec<u8>),
}

impl Reply {
    /// A text answer.
    pub fn text(text: &str) -> Reply {
        Reply::Answer {
            text: text.to_string(),
            calls: Vec::new(),
        }
    }

    /// One tool call.
    // A tool use goes through an agent: troupe-agents' anthropic_agent.rs asks for it.
    #[allow(dead_code)]
    pub fn call(id: &str, name: &str, arguments: &str) -> Reply {
        Reply::Answer {
            text: String::new(),
            calls: vec![(id.into(), name.into(), arguments.into())],
        }
    }
}

/// What one request carried.
#[derive(Debug, Clone)]
pub struct Received {
    pub body: Value,
    pub api_key: Option<String>,
    pub version: Option<String>,
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
    /// Hashes of the prefixes written to the cache.
    cache: Mutex<HashSet<u64>>,
}

/// A running server; stops when dropped.
pub struct AnthropicServer {
    /// `http://127.0.0.1:<port>`, to use as the provider's base URL.
    pub base_url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AnthropicServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AnthropicServer {
    /// Start a server that plays `script`, one reply per request.
    pub async fn start(script: impl IntoIterator<Item = Reply>) -> AnthropicServer {
        let shared = Arc::new(Shared::default());
        shared.script.lock().unwrap().extend(script);
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        AnthropicServer {
            base_url: format!("http://{addr}"),
            shared,
            task,
        }
    }

    /// Every request received, in order (one per attempt).
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn attempts(&self) -> usize {
        self.shared.received.lock().unwrap().len()
    }
}

fn error(status: u16, kind: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: String) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    // Speak the real protocol: what the API refuses is refused here too.
    let Ok(request) = serde_json::from_str::<Value>(&body) else {
        return error(400, "invalid_request_error", "invalid JSON body");
    };
    if header("anthropic-version").is_none() {
        return error(
            400,
            "invalid_request_error",
            "anthropic-version: header is required",
        );
    }
    if !request["model"].is_string()
        || !request["max_tokens"].is_u64()
        || !request["messages"].is_array()
    {
        return error(
            400,
            "invalid_request_error",
            "model, max_tokens and messages are required",
        );
    }
    let prompt = prompt_blocks(&request);
    let marks = prompt.iter().filter(|(_, marked)| *marked).count();
    if marks > 4 {
        return error(
            400,
            "invalid_request_error",
            "A maximum of 4 blocks with cache_control may be provided.",
        );
    }
    shared.received.lock().unwrap().push(Received {
        body: request,
        api_key: header("x-api-key"),
        version: header("anthropic-version"),
    });
    let reply = shared.script.lock().unwrap().pop_front();
    match reply {
        None => error(
            400,
            "invalid_request_error",
            "fault server: script exhausted",
        ),
        Some(Reply::Status {
            status,
            kind,
            message,
            retry_after,
        }) => {
            let mut response = error(status, kind, message);
            if let Some(seconds) = retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", seconds.parse().unwrap());
            }
            response
        }
        Some(Reply::Raw(bytes)) => event_stream(vec![bytes]),
        Some(Reply::Answer { text, calls }) => {
            let usage = shared.cache_usage(&prompt);
            event_stream(answer_events(&text, &calls, usage))
        }
    }
}

impl Shared {
    /// The usage of a request with this prompt, and the cache written by it.
    fn cache_usage(&self, prompt: &[(u64, bool)]) -> Value {
        let mut cache = self.cache.lock().unwrap();
        // The hash of each prefix: blocks 0..=i.
        let prefixes: Vec<u64> = prompt
            .iter()
            .scan(0xcbf2_9ce4_8422_2325_u64, |hash, (block, _)| {
                *hash = (*hash ^ block).wrapping_mul(0x0100_0000_01b3);
                Some(*hash)
            })
            .collect();
        let mut read_until = 0; // blocks read from the cache
        let mut last_mark = 0; // blocks up to and including the last mark
        for (i, (_, marked)) in prompt.iter().enumerate() {
            if !marked {
                continue;
            }
            last_mark = i + 1;
            // Like Anthropic, a mark finds a cached prefix up to 20 blocks before it.
            if let Some(hit) = (i.saturating_sub(19)..=i)
                .rev()
                .find(|j| cache.contains(&prefixes[*j]))
            {
                read_until = read_until.max(hit + 1);
            }
        }
        for (i, (_, marked)) in prompt.iter().enumerate() {
            if *marked {
                cache.insert(prefixes[i]);
            }
        }
        let tokens = |range: std::ops::Range<usize>| -> u64 {
            prompt[range].iter().map(|(k, _)| k >> 48).sum()
        };
        json!({
            "input_tokens": tokens(last_mark.max(read_until)..prompt.len()),
            "cache_read_input_tokens": tokens(0..read_until),
            "cache_creation_input_tokens": tokens(read_until..last_mark.max(read_until)),
            "output_tokens": 1,
        })
    }
}

/// The prompt as blocks in the cache's order (tools, system, messages): for each, its tokens
/// in the top 16 bits and a hash of its JSON (without the mark) below, and whether it is
/// marked.
fn prompt_blocks(request: &Value) -> Vec<(u64, bool)> {
    let mut blocks = Vec::new();
    let mut push = |block: &Value, role: &str| {
        let mut block = block.clone();
        let marked = block
            .as_object_mut()
            .and_then(|b| b.remove("cache_control"))
            .is_some();
        let text = format!("{role}:{block}");
        let tokens = (text.len() as u64 / 4).clamp(1, 0xffff);
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        for byte in text.bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        blocks.push(((tokens << 48) | (hash >> 16), marked));
    };
    for tool in request["tools"].as_array().into_iter().flatten() {
        push(tool, "tool");
    }
    match &request["system"] {
        Value::String(s) => push(&json!({"type": "text", "text": s}), "system"),
        Value::Array(blocks) => blocks.iter().for_each(|b| push(b, "system")),
        _ => {}
    }
    for message in request["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("");
        match &message["content"] {
            Value::String(s) => push(&json!({"type": "text", "text": s}), role),
            Value::Array(blocks) => blocks.iter().for_each(|b| push(b, role)),
            _ => {}
        }
    }
    blocks
}

/// One server-sent event as Anthropic writes it: `event:` with its type, then `data:`.
pub fn event(data: &Value) -> Vec<u8> {
    let kind = data["type"].as_str().unwrap_or("");
    format!("event: {kind}\ndata: {data}\n\n").into_bytes()
}

/// A whole answer as events, each its own network chunk.
fn answer_events(text: &str, calls: &[(String, String, String)], usage: Value) -> Vec<Vec<u8>> {
    let mut events = vec![json!({
        "type": "message_start",
        "message": {"id": "msg_test", "type": "message", "role": "assistant", "content": [],
                    "model": "claude-test", "stop_reason": null, "stop_sequence": null,
                    "usage": usage}
    })];
    let mut index = 0;
    if !text.is_empty() {
        let (a, b) = text.split_at(text.len() / 2);
        events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}));
        events.push(json!({"type": "ping"}));
        for piece in [a, b] {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for (id, name, arguments) in calls {
        events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        let (a, b) = arguments.split_at(arguments.len() / 2);
        for piece in [a, b] {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}}));
    events.push(json!({"type": "message_stop"}));
    events.iter().map(event).collect()
}

/// A `text/event-stream` response writing `chunks` one by one, a few milliseconds apart.
fn event_stream(chunks: Vec<Vec<u8>>) -> Response {
    let body = futures::stream::unfold(chunks.into_iter(), |mut chunks| async move {
        let chunk = chunks.next()?;
        tokio::time::sleep(Duration::from_millis(2)).await;
        Some((Ok::<_, std::io::Error>(chunk), chunks))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(axum::body::Body::from_stream(body))
        .unwrap()
}

/// The key the tests' models send (the 401 test checks it is never shown).
pub(crate) const KEY: &str = "sk-ant-test-key-123456";

/// An [`AnthropicModel`] of `server` with short timeouts and quick retries.
pub(crate) fn model(server: &AnthropicServer) -> AnthropicModel {
    let config = AnthropicConfig::new(&server.base_url, "claude-test")
        .with_api_key(KEY)
        .with_request_timeout(Duration::from_millis(1000))
        .with_retry(RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(5),
        });
    AnthropicModel::new(config).unwrap()
}
