//! `troupe mcp serve` under hostile input, driven as a child process with raw JSON-RPC lines:
//! `path` confined to the root (regular files only, size-capped, errors that never quote a
//! file), every message answered (too large, nested too deep, a duplicate id), archives kept
//! within a bound, results never cut, and expand_transcript refusing tampered messages.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long any one answer may take; every wait in these tests is bounded by it.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// A running `troupe mcp serve`, initialized.
struct Serve {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Serve {
    /// Serve with `dir` as the working directory, plus `args`.
    fn start(dir: &Path, args: &[&str]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args(["mcp", "serve"])
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut serve = Serve {
            child,
            stdin,
            lines,
        };
        serve.send(&json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "hostile", "version": "0"}
            }
        }));
        assert!(serve.replies(&json!(0), 1)[0].get("result").is_some());
        serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        serve
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    fn send_raw(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next `count` messages with this id, within the deadline.
    fn replies(&self, id: &Value, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + ANSWER_WITHIN;
        let mut found = Vec::new();
        while found.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => panic!("no reply to id {id} within the deadline"),
                Err(RecvTimeoutError::Disconnected) => panic!("the server closed stdout"),
            };
            let message: Value = serde_json::from_str(&line).unwrap();
            if &message["id"] == id {
                found.push(message);
            }
        }
        found
    }

    /// Call `tool`: whether the result is an error, and its text.
    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> (bool, String) {
        self.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}
        }));
        let reply = self.replies(&json!(id), 1).remove(0);
        let result = &reply["result"];
        let text = result["content"][0]["text"].as_str().unwrap().to_string();
        (result["isError"] == json!(true), text)
    }

    /// A call that must succeed, its result parsed.
    fn ok(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        let (error, text) = self.call(id, tool, arguments);
        assert!(!error, "{tool}: {}", head(&text));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool} gave invalid JSON: {e}"))
    }

    /// A call that must fail: its message.
    fn refused(&mut self, id: u64, tool: &str, arguments: Value) -> String {
        let (error, text) = self.call(id, tool, arguments);
        assert!(error, "{tool} should have been refused: {}", head(&text));
        text
    }

    /// Still serving: a ping is answered.
    fn assert_serving(&mut self, id: u64) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        assert!(self.replies(&json!(id), 1)[0].get("result").is_some());
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The start of a long text, for a failure message.
fn head(text: &str) -> &str {
    let mut end = text.len().min(400);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A transcript of `pairs` user/assistant exchanges of about `bytes_each` bytes per message.
fn transcript(pairs: usize, bytes_each: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": "You are a careful engineer."})];
    for i in 0..pairs {
        let words: Vec<String> = (0..bytes_each / 8).map(|w| format!("w{i}x{w}")).collect();
        messages
            .push(json!({"role": "user", "content": format!("question {i}: {}", words.join(" "))}));
        messages.push(
            json!({"role": "assistant", "content": format!("answer {i}: {}", words.join(" "))}),
        );
    }
    json!({ "messages": messages })
}

fn compact_args(path: &str) -> Value {
    json!({"path": path, "window": 8192})
}

#[test]
fn path_is_confined_to_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(
        dir.path().join("outside.json"),
        transcript(2, 40).to_string(),
    )
    .unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside.json"), root.join("link.json")).unwrap();
    let mut serve = Serve::start(&root, &[]);
    let escapes = [
        "/etc/shadow",
        "/etc/passwd",
        "/proc/self/environ",
        "/proc/self/fd/0",
        "../outside.json",
        "link.json",
    ];
    for (id, path) in (1..).zip(escapes) {
        let message = serve.refused(id, "compact_transcript", compact_args(path));
        assert!(message.contains("refused"), "{path}: {message}");
        assert!(!message.contains("root:"), "{path}: {message}");
    }
    // The same file is served when the root holds it.
    let mut wider = Serve::start(&root, &["--root", dir.path().to_str().unwrap()]);
    wider.ok(1, "compact_transcript", compact_args("outside.json"));
}

#[test]
fn a_refused_file_is_never_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-SECRETSECRETSECRET";
    let files = [
        ("env", format!("OPENAI_API_KEY={secret}\n")),
        ("shape.json", format!("{{\"messages\": \"{secret}\"}}")),
        (
            "role.json",
            format!("[{{\"role\": \"{secret}\", \"content\": \"x\"}}]"),
        ),
        (
            "broken.json",
            format!("{{\"messages\": [{{\"role\": \"user\", \"content\": \"{secret}\""),
        ),
        ("binary", "\u{0}\u{1}\u{2}".to_string()),
    ];
    for (name, text) in &files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let mut serve = Serve::start(dir.path(), &[]);
    for (i, (name, _)) in files.iter().enumerate() {
        let message = serve.refused(i as u64 + 1, "compact_transcript", compact_args(name));
        assert!(!message.contains("SECRET"), "{name}: {message}");
        assert!(
            message.contains("line 1") || message.contains("not"),
            "{name}: {message}"
        );
    }
    let shape = serve.refused(9, "compact_transcript", compact_args("shape.json"));
    assert!(shape.contains("expected"), "{shape}");
}

#[test]
fn only_regular_files_of_bounded_size_are_read_and_a_fifo_never_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let huge = std::fs::File::create(dir.path().join("huge.json")).unwrap();
    huge.set_len(33 * 1024 * 1024).unwrap();
    let mut serve = Serve::start(dir.path(), &[]);
    // No writer ever opens the FIFO: a blocking open or read would never return.
    let message = serve.refused(1, "compact_transcript", compact_args("fifo"));
    assert!(message.contains("FIFO"), "{message}");
    let message = serve.refused(2, "compact_transcript", compact_args("huge.json"));
    assert!(
        message.contains("too") || message.contains("more than"),
        "{message}"
    );
    assert!(
        message.contains(&(32 * 1024 * 1024).to_string()),
        "{message}"
    );
    serve.assert_serving(3);

    // Devices are refused even beneath the root.
    let mut dev = Serve::start(dir.path(), &["--root", "/dev"]);
    for (i, path) in ["zero", "/dev/zero", "stdin", "urandom"].iter().enumerate() {
        let message = dev.refused(i as u64 + 1, "compact_transcript", compact_args(path));
        assert!(
            message.contains("not a regular file") || message.contains("refused"),
            "{path}: {message}"
        );
    }
    dev.assert_serving(9);
}

#[test]
fn an_oversized_or_deeply_nested_request_is_answered_and_serving_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), &[]);
    let text = "a".repeat(17 * 1024 * 1024);
    // The id comes after the oversized part: it is found all the same.
    serve.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"count_tokens","arguments":{{"text":"{text}"}}}},"id":41}}"#
    ));
    let reply = serve.replies(&json!(41), 1).remove(0);
    assert_eq!(reply["error"]["code"], json!(-32600), "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too large"),
        "{reply}"
    );
    serve.assert_serving(42);

    let depth = 100_000;
    serve.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{{"name":"count_tokens","arguments":{{"text":{}"x"{}}}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    ));
    let reply = serve.replies(&json!("deep"), 1).remove(0);
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nested"),
        "{reply}"
    );
    serve.assert_serving(43);
}

#[test]
fn every_request_under_a_duplicate_id_gets_its_reply() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), &[]);
    let call = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "count_tokens", "arguments": {"text": "hello"}}
    })
    .to_string();
    // One write: the second usually arrives while the first is in flight (then it is answered
    // "duplicate request id"); when the first was already answered, the id was free again and
    // both get results. Either way each request gets its own reply — before, one got none.
    serve.send_raw(&format!("{call}\n{call}"));
    let replies = serve.replies(&json!(7), 2);
    assert_eq!(replies.len(), 2, "{replies:?}");
    for reply in &replies {
        match reply.get("error") {
            Some(error) => assert!(
                error["message"]
                    .as_str()
                    .unwrap()
                    .contains("duplicate request id"),
                "{replies:?}"
            ),
            None => assert!(reply.get("result").is_some(), "{replies:?}"),
        }
    }
    assert!(
        replies.iter().any(|r| r.get("result").is_some()),
        "the first request is answered: {replies:?}"
    );
    // Once answered, the id is free again.
    serve.ok(7, "count_tokens", json!({"text": "again"}));
}

#[test]
fn archives_are_kept_within_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), &[]);
    let messages = transcript(1, 16)["messages"].clone();
    let mut ids = Vec::new();
    for i in 0..33 {
        let result = serve.ok(
            i + 1,
            "compact_transcript",
            json!({"messages": messages, "window": 8192}),
        );
        ids.push(result["archive_id"].as_str().unwrap().to_string());
    }
    let message = serve.refused(100, "expand_transcript", json!({"archive_id": ids[0]}));
    assert!(message.contains("evicted"), "{message}");
    assert!(message.contains("32"), "{message}");
    let restored = serve.ok(101, "expand_transcript", json!({"archive_id": ids[32]}));
    assert_eq!(restored["messages"], messages);
    let unknown = serve.refused(102, "expand_transcript", json!({"archive_id": "nope"}));
    assert!(unknown.contains("no archive `nope`"), "{unknown}");
}

#[test]
fn large_transcripts_round_trip_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), &[]);
    let mut id = 1;
    // About 100 KB and 1 MB.
    for (pairs, window, at_least) in [(60, 16_384, 100_000), (580, 131_072, 1_000_000)] {
        let original = transcript(pairs, 1000);
        let bytes = original.to_string().len();
        assert!(bytes > at_least, "{bytes}");
        let name = format!("t{pairs}.json");
        std::fs::write(dir.path().join(&name), original.to_string()).unwrap();
        // Compacted, then restored: the restored result is the whole original.
        let compacted = serve.ok(
            id,
            "compact_transcript",
            json!({"path": name, "window": window}),
        );
        let restored = serve.ok(
            id + 1,
            "expand_transcript",
            json!({"archive_id": compacted["archive_id"], "messages": compacted["messages"]}),
        );
        assert_eq!(restored["messages"], original["messages"]);
        // With room for all of it, nothing is compacted: the result itself is that large.
        let whole = serve.ok(
            id + 2,
            "compact_transcript",
            json!({"messages": original["messages"], "window": 4_000_000, "target": 0.9}),
        );
        assert_eq!(whole["messages"], original["messages"]);
        id += 3;
    }
}

#[test]
fn expand_refuses_tampered_or_reordered_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), &[]);
    let original = transcript(20, 600);
    let compacted = serve.ok(
        1,
        "compact_transcript",
        json!({"messages": original["messages"], "window": 4096, "protected": 2}),
    );
    let archive = compacted["archive_id"].clone();
    let messages = compacted["messages"].as_array().unwrap().clone();
    assert!(messages.len() >= 3, "{compacted}");

    let mut edited = messages.clone();
    let last = edited.len() - 1;
    edited[last]["content"] = json!("something the model never said");
    let message = serve.refused(
        2,
        "expand_transcript",
        json!({"archive_id": archive, "messages": edited}),
    );
    assert!(message.contains("sha256"), "{message}");

    let mut reordered = messages.clone();
    reordered.swap(last - 1, last);
    let message = serve.refused(
        3,
        "expand_transcript",
        json!({"archive_id": archive, "messages": reordered}),
    );
    assert!(message.contains("sha256"), "{message}");

    let restored = serve.ok(
        4,
        "expand_transcript",
        json!({"archive_id": archive, "messages": messages}),
    );
    assert_eq!(restored["messages"], original["messages"]);
}
