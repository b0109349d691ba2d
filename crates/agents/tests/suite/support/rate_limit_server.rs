//! An OpenAI-compatible server that enforces a rate limit, as providers do: more than `limit`
//! accepted requests within a sliding minute get `429` with a `Retry-After` saying when the
//! oldest leaves it; a storm answers the next few requests `429` whatever the count. It keeps
//! every arrival (when, which user message, what it answered) and counts the requests that came
//! after it had told someone to wait but before the time it named.
//!
//! Time is tokio's, so a test on paused time runs minutes of rate limit in no time.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::model_fault_server::completion_text;

/// The span the server counts over.
const MINUTE: Duration = Duration::from_secs(60);

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// When it arrived, from the server's start.
    pub at: Duration,
    /// The text of its last user message.
    pub asked: String,
    /// Whether it was answered `429`.
    pub refused: bool,
}

struct Shared {
    started: Instant,
    limit: usize,
    /// When the accepted requests of the last minute arrived, oldest first.
    accepted: VecDeque<Instant>,
    /// How many of the next requests get `429` whatever the count, and the `Retry-After`.
    storm: (usize, u64),
    arrivals: Vec<Arrival>,
    /// The last `429` sent (when) and the time it named.
    told: Option<(Instant, Instant)>,
    /// Requests that arrived after a `429` was sent but before the time it named.
    early: usize,
}

/// A running server; stops when dropped.
pub struct LimitServer {
    /// `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LimitServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LimitServer {
    /// A server accepting at most `limit` requests a minute.
    pub async fn start(limit: usize) -> LimitServer {
        let shared = Arc::new(Mutex::new(Shared {
            started: Instant::now(),
            limit,
            accepted: VecDeque::new(),
            storm: (0, 0),
            arrivals: Vec::new(),
            told: None,
            early: 0,
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        LimitServer {
            base_url: format!("http://{addr}/v1"),
            shared,
            task,
        }
    }

    /// Count `n` requests as accepted now, as if another client of the same key made them.
    pub fn used_by_others(&self, n: usize) {
        let mut shared = self.shared.lock().unwrap();
        let now = Instant::now();
        shared.accepted.extend(std::iter::repeat_n(now, n));
    }

    /// Answer the next `n` requests `429` with `Retry-After: seconds`.
    pub fn storm(&self, n: usize, seconds: u64) {
        self.shared.lock().unwrap().storm = (n, seconds);
    }

    /// Every request, in the order it arrived.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.shared.lock().unwrap().arrivals.clone()
    }

    /// How many `429`s the server sent.
    pub fn refused(&self) -> usize {
        self.arrivals().iter().filter(|a| a.refused).count()
    }

    /// Requests that came after a `429` had been sent and before the time it named.
    pub fn early(&self) -> usize {
        self.shared.lock().unwrap().early
    }
}

fn rate_limited(retry_after: u64) -> Response {
    let body = json!({"error": {
        "message": "Rate limit reached for requests",
        "type": "requests",
        "param": null,
        "code": "rate_limit_exceeded"
    }});
    let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert("retry-after", retry_after.to_string().parse().unwrap());
    response
}

async fn chat_completions(State(shared): State<Arc<Mutex<Shared>>>, body: String) -> Response {
    let Ok(request) = serde_json::from_str::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "invalid JSON body").into_response();
    };
    let Some(messages) = request["messages"].as_array() else {
        return (StatusCode::BAD_REQUEST, "`messages` is required").into_response();
    };
    let asked = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    let mut shared = shared.lock().unwrap();
    let now = Instant::now();
    // Sent later than a 429 (not in flight beside it) yet before the time it named.
    if let Some((sent, until)) = shared.told
        && now > sent
        && now < until
    {
        shared.early += 1;
    }
    while shared
        .accepted
        .front()
        .is_some_and(|at| *at + MINUTE <= now)
    {
        shared.accepted.pop_front();
    }
    let retry_after = if shared.storm.0 > 0 {
        shared.storm.0 -= 1;
        Some(shared.storm.1)
    } else if shared.accepted.len() >= shared.limit {
        let oldest = shared.accepted[shared.accepted.len() - shared.limit];
        Some((oldest + MINUTE - now).as_secs_f64().ceil() as u64)
    } else {
        None
    };
    let at = now - shared.started;
    shared.arrivals.push(Arrival {
        at,
        asked: asked.clone(),
        refused: retry_after.is_some(),
    });
    match retry_after {
        Some(seconds) => {
            shared.told = Some((now, now + Duration::from_secs(seconds)));
            rate_limited(seconds)
        }
        None => {
            shared.accepted.push_back(now);
            axum::Json(completion_text(&format!("answered: {asked}"))).into_response()
        }
    }
}
