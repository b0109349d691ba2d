//! Fake OpenAI-compatible servers on 127.0.0.1 for the tests that run `troupe chat` and
//! `troupe node`: they speak the real wire format (JSON or server-sent events) and keep what
//! they were asked.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::{Value, json};

/// A minimal OpenAI-compatible `/v1/chat/completions` server: it answers every request with
/// `reply N` and keeps the request bodies.
pub(crate) struct ChatServer {
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    held: Gate,
}

/// Held requests wait on this until it opens ([`ChatServer::release_held`]) or their delay ends.
type Gate = Arc<(Mutex<bool>, Condvar)>;

/// What a [`ChatServer`] answers to its `n`-th request (from 1).
pub(crate) type Reply = Arc<dyn Fn(usize) -> String + Send + Sync>;

/// Reads one HTTP request from `stream` and returns its JSON body (also used by
/// `compact_trace.rs`).
pub(crate) fn read_request(stream: &mut TcpStream) -> Option<Value> {
    read_request_authorized(stream).map(|(_, body)| body)
}

/// [`read_request`] with the request's `authorization` header (empty when it has none).
pub(crate) fn read_request_authorized(stream: &mut TcpStream) -> Option<(String, Value)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let (mut length, mut authorization) = (0usize, String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            } else if name.eq_ignore_ascii_case("authorization") {
                authorization = value.trim().to_string();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((authorization, serde_json::from_slice(&body).ok()?))
}

impl ChatServer {
    pub(crate) fn start() -> ChatServer {
        Self::start_with(Arc::new(|n| format!("reply {n}")))
    }

    /// A server that answers its `n`-th request with `reply(n)`.
    pub(crate) fn start_with(reply: Reply) -> ChatServer {
        Self::start_holding(reply, "slow", std::time::Duration::from_secs(30))
    }

    /// A server that answers its `n`-th request with `reply(n)`, a request mentioning `hold`
    /// only after `delay` or once [`ChatServer::release_held`] is called, whichever is first.
    pub(crate) fn start_holding(
        reply: Reply,
        hold: &'static str,
        delay: std::time::Duration,
    ) -> ChatServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let held: Gate = Arc::default();
        let gate = held.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let seen = seen.clone();
                let reply = reply.clone();
                let gate = gate.clone();
                std::thread::spawn(move || {
                    Self::answer(&mut stream, &seen, &reply, (hold, delay, &gate));
                });
            }
        });
        ChatServer {
            url,
            requests,
            held,
        }
    }

    /// Answers the held requests now, and every later one mentioning the held text at once.
    pub(crate) fn release_held(&self) {
        let (released, wake) = &*self.held;
        *released.lock().unwrap() = true;
        wake.notify_all();
    }

    /// Answer one request with `reply(N)`; a request mentioning `hold` is answered after `delay`
    /// or when the gate opens.
    fn answer(
        stream: &mut TcpStream,
        seen: &Mutex<Vec<Value>>,
        reply: &Reply,
        (hold, delay, gate): (&str, std::time::Duration, &Gate),
    ) {
        let Some(request) = read_request(stream) else {
            return;
        };
        let slow = request.to_string().contains(hold);
        let n = {
            let mut seen = seen.lock().unwrap();
            seen.push(request);
            seen.len()
        };
        if slow {
            let (released, wake) = &**gate;
            let guard = released.lock().unwrap();
            let _ = wake
                .wait_timeout_while(guard, delay, |released| !*released)
                .unwrap();
        }
        let body = json!({
            "id": format!("chatcmpl-{n}"),
            "object": "chat.completion",
            "created": 1,
            "model": "test-model",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": reply(n)},
                "finish_reason": "stop"
            }],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        })
        .to_string();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    }

    /// Whether a request so far mentions `text`.
    pub(crate) fn seen(&self, text: &str) -> bool {
        let requests = self.requests.lock().unwrap();
        requests.iter().any(|r| r.to_string().contains(text))
    }

    /// The `i`-th request's body.
    pub(crate) fn request(&self, i: usize) -> Value {
        self.requests.lock().unwrap()[i].clone()
    }

    /// The user and assistant texts of the `i`-th request.
    pub(crate) fn dialogue(&self, i: usize) -> Vec<String> {
        let requests = self.requests.lock().unwrap();
        requests[i]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    pub(crate) fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

/// An OpenAI-compatible server that answers the first request as a server-sent event stream:
/// `first` as one chunk, then — only once the test releases it — `rest` and the end of the
/// stream. Returns the base URL and the release.
pub(crate) fn gated_stream_server(
    first: &str,
    rest: &str,
) -> (String, std::sync::mpsc::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let (first, rest) = (first.to_string(), rest.to_string());
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        read_request(&mut stream);
        let chunk = |delta: Value, finish: Option<&str>| {
            let chunk = json!({
                "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                "model": "test-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            });
            format!("data: {chunk}\n\n")
        };
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        let opening = chunk(json!({"role": "assistant", "content": first}), None);
        let _ = stream.write_all(format!("{head}{opening}").as_bytes());
        let _ = stream.flush();
        let _ = gate.recv_timeout(std::time::Duration::from_secs(60));
        let ending = chunk(json!({"content": rest}), Some("stop"));
        let _ = stream.write_all(format!("{ending}data: [DONE]\n\n").as_bytes());
    });
    (url, release)
}
