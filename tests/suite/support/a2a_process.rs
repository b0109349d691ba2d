//! `troupe a2a serve` as a child process — started on a config, its address (and the key it
//! printed, when it made one) read from its standard output, killed when dropped — and HTTP
//! requests to it written by hand, so a test can send what a hostile client or browser would.

use std::io::{BufRead as _, BufReader, ErrorKind, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// A running `troupe a2a serve`, killed on drop (the test passing or not).
pub(crate) struct A2aProcess {
    pub(crate) child: Child,
    /// `HOST:PORT` it listens on.
    pub(crate) addr: String,
    /// What it printed on standard output before `READY`.
    pub(crate) printed: Vec<String>,
    /// The key requests carry (`Authorization: Bearer`): the one it printed, or one set with
    /// [`A2aProcess::with_key`]; none when it printed none.
    pub(crate) key: Option<String>,
}

impl A2aProcess {
    /// `troupe a2a serve --listen 127.0.0.1:0 --config CONFIG ARGS…` with `env` set (and the
    /// chat model's key, `TEST_CHAT_KEY`), once it printed `READY`.
    pub(crate) fn start(config: &Path, args: &[&str], env: &[(&str, &str)]) -> A2aProcess {
        let mut child = Self::command(config, args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut process = A2aProcess {
            child,
            addr: String::new(),
            printed: Vec::new(),
            key: None,
        };
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("no READY; printed {:?}", process.printed))
                .unwrap();
            if let Some(addr) = line.trim().strip_prefix("READY ") {
                process.addr = addr.to_string();
                break;
            }
            if let Some(key) = line.trim().strip_prefix("key: ") {
                process.key = key.split_whitespace().next().map(str::to_string);
            }
            process.printed.push(line);
        }
        // The rest of its output is not read: keep the pipe drained so it never blocks.
        std::thread::spawn(move || lines.for_each(drop));
        process
    }

    /// The command [`A2aProcess::start`] runs (for a test that expects it to fail).
    pub(crate) fn command(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
        command
            .args(["a2a", "serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .args(args)
            .env("TEST_CHAT_KEY", "sk-test")
            .stdin(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        command
    }

    /// The same server, its requests carrying `key`.
    pub(crate) fn with_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_string());
        self
    }

    /// A request to `path` as a well-behaved client sends it: `Host` the server's address, a
    /// JSON body, `A2A-Version: 1.0`, the key.
    pub(crate) fn request(&self, method: &str, path: &str) -> RawRequest {
        let mut request = RawRequest {
            addr: self.addr.clone(),
            head: format!("{method} {path} HTTP/1.1"),
            headers: vec![
                ("Host".into(), self.addr.clone()),
                ("Content-Type".into(), "application/json".into()),
                ("A2A-Version".into(), "1.0".into()),
            ],
            body: String::new(),
        };
        if let Some(key) = &self.key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        request
    }

    /// A JSON-RPC call of `method` on `agent`: the answer's JSON.
    pub(crate) fn rpc(&self, agent: &str, method: &str, params: Value) -> Value {
        self.rpc_as(self.key.as_deref(), agent, method, params)
    }

    /// [`A2aProcess::rpc`] with `key` (none: no `Authorization`).
    pub(crate) fn rpc_as(
        &self,
        key: Option<&str>,
        agent: &str,
        method: &str,
        params: Value,
    ) -> Value {
        let mut request = self
            .request("POST", &format!("/agents/{agent}"))
            .without("Authorization")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        if let Some(key) = key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let answer = request.send();
        serde_json::from_str(&answer.body)
            .unwrap_or_else(|e| panic!("{method}: not JSON ({e}): {answer:?}"))
    }
}

impl Drop for A2aProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP/1.1 request written by hand (`Connection: close`).
#[derive(Debug, Clone)]
pub(crate) struct RawRequest {
    addr: String,
    head: String,
    headers: Vec<(String, String)>,
    body: String,
}

/// What came back: the status, the head's header lines, the body.
#[derive(Debug)]
pub(crate) struct RawAnswer {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl RawAnswer {
    /// The first header of that name (any case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl RawRequest {
    /// Set `name` to `value` (replacing it when already set).
    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self = self.without(name);
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Send no `name` header.
    pub(crate) fn without(mut self, name: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self
    }

    /// The body, as given.
    pub(crate) fn body(mut self, body: &str) -> Self {
        self.body = body.to_string();
        self
    }

    /// A JSON body.
    pub(crate) fn json(self, body: &Value) -> Self {
        self.body(&body.to_string())
    }

    /// Send it (a `Content-Length` of the body's unless one was set) and read the answer to
    /// its end, within 30 s.
    pub(crate) fn send(self) -> RawAnswer {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut text = format!("{}\r\n", self.head);
        for (name, value) in &self.headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        if !self
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        {
            text.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        text.push_str("Connection: close\r\n\r\n");
        text.push_str(&self.body);
        stream.write_all(text.as_bytes()).unwrap();
        let mut answer = Vec::new();
        match stream.read_to_end(&mut answer) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!(
                    "no whole answer within 30 s to {}: {:?}",
                    self.head,
                    String::from_utf8_lossy(&answer)
                )
            }
            Err(e) if answer.is_empty() => panic!("{}: {e}", self.head),
            Err(_) => {}
        }
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {answer:?}"));
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
            .collect::<Vec<_>>();
        let chunked = headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
        });
        let body = if chunked {
            unchunk(body)
        } else {
            body.to_string()
        };
        RawAnswer {
            status,
            headers,
            body,
        }
    }
}

/// A chunked body's data.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// A user message of `text`, in the context `context` when given, on the task `task` when
/// given.
pub(crate) fn message(text: &str, context: Option<&str>, task: Option<&str>) -> Value {
    static SENT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SENT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut message = json!({"messageId": format!("m-{n}"), "role": "ROLE_USER",
        "parts": [{"text": text}]});
    if let Some(context) = context {
        message["contextId"] = json!(context);
    }
    if let Some(task) = task {
        message["taskId"] = json!(task);
    }
    json!({ "message": message })
}
