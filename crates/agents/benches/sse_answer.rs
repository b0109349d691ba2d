//! One big streamed answer through each HTTP provider (#41): a text answer of
//! `TROUPE_BENCH_MIB` MiB (default 16) sent by a local server in the real wire format as one
//! `data:` line (an OpenAI `chat.completion.chunk`, an Anthropic `text_delta` event), in
//! 64 KiB network writes, read whole by `chat`.
//!
//! Run: `cargo bench -p troupe-agents --no-default-features --bench sse_answer` (release), or
//! `cargo test -p troupe-agents --no-default-features --bench sse_answer` for a debug build.
//!
//! With `TROUPE_BENCH_AGENT=1`, the same answers are also asked of an agent (a team of one),
//! so the agent's own copies count too.
//!
//! Per provider: the wall time of the call, the process's CPU time over it (user + system,
//! `/proc/self/stat`; the server's share is its 64 KiB slices of one prepared body), and the
//! peak of live heap bytes over the call above what was live before it (a counting global
//! allocator), as a multiple of the answer's size. The request's `max_tokens` and the window
//! leave the answer under the providers' answer cap.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use troupe_agents::{AgentSpec, spawn_agent};
use troupe_models::{AnthropicConfig, AnthropicModel, OpenAiConfig, OpenAiModel};
use troupe_protocol::{ChatMessage, ChatModel, ChatRequest};
use troupe_runtime::{Team, TeamConfig};

#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

/// A global allocator wrapper is `unsafe` by nature; only this module may be.
#[allow(unsafe_code)]
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicIsize, Ordering};

    /// The system allocator, counting the bytes live and their peak.
    pub struct Counting;

    static LIVE: AtomicIsize = AtomicIsize::new(0);
    static PEAK: AtomicIsize = AtomicIsize::new(0);

    fn grew(by: isize) {
        let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }

    // SAFETY: every call is forwarded unchanged to the system allocator; only counters are
    // added.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded with the caller's layout.
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                grew(layout.size() as isize);
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded with the caller's layout.
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                grew(layout.size() as isize);
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` was allocated by `System` with `layout`.
            unsafe { System.dealloc(ptr, layout) };
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: `ptr` was allocated by `System` with `layout`.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                grew(new_size as isize - layout.size() as isize);
            }
            p
        }
    }

    /// Start a new peak from what is live now; returns it.
    pub fn reset_peak() -> isize {
        let now = LIVE.load(Ordering::Relaxed);
        PEAK.store(now, Ordering::Relaxed);
        now
    }

    pub fn peak() -> isize {
        PEAK.load(Ordering::Relaxed)
    }
}

/// The process's peak resident set (`VmHWM`), after [`reset_rss_peak`].
fn rss_peak() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Start a new peak resident set from what is resident now (Linux's `clear_refs` 5).
fn reset_rss_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// CPU time of the process so far (user + system), from `/proc/self/stat`.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

const WRITE: usize = 64 * 1024;

async fn serve(State(body): State<Bytes>) -> Response {
    let pieces: Vec<Bytes> = (0..body.len())
        .step_by(WRITE)
        .map(|at| body.slice(at..(at + WRITE).min(body.len())))
        .collect();
    let stream = futures::stream::iter(pieces.into_iter().map(Ok::<_, std::io::Error>));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// A server answering every POST to `path` with `body`; its base URL.
async fn start(path: &str, body: Vec<u8>) -> String {
    let app = Router::new()
        .route(path, post(serve))
        .with_state(Bytes::from(body));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn openai_body(text: &str) -> Vec<u8> {
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        serde_json::json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-bench", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut body = Vec::new();
    for event in [
        chunk(
            serde_json::json!({"role": "assistant", "content": text}),
            None,
        ),
        chunk(serde_json::json!({}), Some("stop")),
    ] {
        body.extend(format!("data: {event}\n\n").into_bytes());
    }
    body.extend_from_slice(b"data: [DONE]\n\n");
    body
}

fn anthropic_body(text: &str) -> Vec<u8> {
    let events = [
        serde_json::json!({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        serde_json::json!({"type": "content_block_stop", "index": 0}),
        serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        serde_json::json!({"type": "message_stop"}),
    ];
    events
        .iter()
        .flat_map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()).into_bytes())
        .collect()
}

/// Tokens enough for the answer under any cap of a few bytes a token.
const MAX_TOKENS: u32 = 4_000_000;
const WINDOW: usize = 4_000_000;

/// Measure `call` (which reads a whole answer: its length, or why not).
async fn measure<F: std::future::Future<Output = Result<usize, String>>>(
    name: &str,
    answer_len: usize,
    call: F,
) {
    let before = heap::reset_peak();
    reset_rss_peak();
    let rss_before = rss_peak();
    let cpu = cpu_time();
    let started = Instant::now();
    let result = call.await;
    let wall = started.elapsed();
    let cpu = cpu_time().saturating_sub(cpu);
    let peak = heap::peak() - before;
    let rss = rss_peak().saturating_sub(rss_before);
    let mib = |bytes: f64| bytes / (1 << 20) as f64;
    println!(
        "{name}: {:.0} MiB answer in one event: wall {:.2} s, cpu {:.2} s, peak heap +{:.1} MiB ({:.1}x the answer), peak RSS +{:.1} MiB, read {result:?}",
        mib(answer_len as f64),
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        mib(peak as f64),
        peak as f64 / answer_len as f64,
        mib(rss as f64),
    );
}

/// The model's whole answer, as `chat` collects it.
async fn chat(model: &dyn ChatModel) -> Result<usize, String> {
    let mut request = ChatRequest::new([ChatMessage::user("Write it all.")]);
    request.max_tokens = Some(MAX_TOKENS);
    let answer = model.chat(request).await.map_err(|e| e.to_string())?;
    Ok(answer.message.text().len())
}

/// The model's whole answer as an agent's (`TROUPE_BENCH_AGENT=1`): the answer also goes
/// through the agent's turn, its events and its conversation.
async fn ask_agent(model: Arc<dyn ChatModel>) -> Result<usize, String> {
    let team = Team::start(TeamConfig::default())
        .await
        .map_err(|e| e.to_string())?;
    let spec = AgentSpec::new("writer", model).max_tokens(MAX_TOKENS);
    spawn_agent(&team, spec).await.map_err(|e| e.to_string())?;
    let answer = team.ask("writer", "Write it all.").await;
    team.shutdown().await;
    answer.map(|a| a.len()).map_err(|e| e.to_string())
}

fn main() {
    // `cargo bench` passes `--bench`; a filter that excludes us skips the measurement.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"sse_answer".contains(&a))
    {
        return;
    }
    let mib: usize = std::env::var("TROUPE_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let text = "x".repeat(mib << 20);
    // The tokenizer's vocabulary is built once per process (tens of MiB): not the answer's.
    let _ =
        troupe_tokens::TokenCounter::count(&troupe_tokens::TiktokenCounter::default(), "warm up");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let timeout = Duration::from_secs(600);
        let base = start("/v1/chat/completions", openai_body(&text)).await;
        let openai = OpenAiModel::new(
            OpenAiConfig::new(format!("{base}/v1"), "gpt-bench")
                .with_context_window(WINDOW)
                .with_request_timeout(timeout),
        )
        .unwrap();
        let openai: Arc<dyn ChatModel> = Arc::new(openai);
        measure("openai chat", text.len(), chat(openai.as_ref())).await;
        let base = start("/v1/messages", anthropic_body(&text)).await;
        let anthropic = AnthropicModel::new(
            AnthropicConfig::new(base, "claude-bench")
                .with_context_window(WINDOW)
                .with_request_timeout(timeout),
        )
        .unwrap();
        let anthropic: Arc<dyn ChatModel> = Arc::new(anthropic);
        measure("anthropic chat", text.len(), chat(anthropic.as_ref())).await;
        if std::env::var_os("TROUPE_BENCH_AGENT").is_some() {
            measure("openai agent", text.len(), ask_agent(openai)).await;
            measure("anthropic agent", text.len(), ask_agent(anthropic)).await;
        }
    });
}
