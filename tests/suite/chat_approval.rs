//! `troupe chat` and tool approval (#33): the chat asks y/n/edit about a call the agent's policy
//! pauses on; a chat killed with SIGKILL while it asks resumes from its session log, asks again
//! at the next message, and the approved command runs exactly once.

use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::chat::spawn_chat;
use super::chat_live::Live;
use super::chat_server::read_request;

/// The command the model asks to run: it leaves one line in `runs.txt` per run.
const COMMAND: &str = "echo ran >> runs.txt && echo once";

/// An OpenAI-compatible server whose model asks for [`COMMAND`] when the last message is the
/// user's "clean up", and otherwise answers `done N`. Keeps the request bodies.
fn tool_calling_server() -> (String, Arc<Mutex<Vec<Value>>>) {
    server_calling(json!([{
        "id": "call_rm", "type": "function",
        "function": {"name": "shell", "arguments": json!({"command": COMMAND}).to_string()}
    }]))
}

/// An OpenAI-compatible server whose model answers the user's "clean up" with `tool_calls`
/// (exactly as given: a hostile model's ids and arguments included), and anything else with
/// `done N`. Keeps the request bodies.
pub(super) fn server_calling(tool_calls: Value) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Some(request) = read_request(&mut stream) else {
                continue;
            };
            let last = request["messages"]
                .as_array()
                .and_then(|m| m.last().cloned())
                .unwrap_or_default();
            let n = {
                let mut seen = seen.lock().unwrap();
                seen.push(request);
                seen.len()
            };
            let message = if last["role"] == "user" && last["content"] == "clean up" {
                json!({"role": "assistant", "content": null, "tool_calls": tool_calls})
            } else {
                json!({"role": "assistant", "content": format!("done {n}")})
            };
            let finish = if message.get("tool_calls").is_some() {
                "tool_calls"
            } else {
                "stop"
            };
            let body = json!({
                "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1,
                "model": "test-model",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
            })
            .to_string();
            use std::io::Write as _;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, requests)
}

fn write_config(dir: &Path, url: &str) -> std::path::PathBuf {
    write_config_with(
        dir,
        url,
        r#"[{ tool = "shell", argument = "command", prefix = "echo ", policy = "ask" }]"#,
    )
}

/// A chat configuration for the model at `url` with the `shell` tool and these `approve` rules
/// (TOML).
pub(super) fn write_config_with(dir: &Path, url: &str, approve: &str) -> std::path::PathBuf {
    let config = dir.join("troupe.toml");
    let text = format!(
        r#"
[models.remote]
provider = "openai"
base_url = "{url}"
api_key_env = "TEST_CHAT_KEY"
model = "test-model"
context_window = 8000

[tools]
workspace = "{root}"

[agents.assistant]
model = "remote"
instructions = "Be brief."
tools = ["shell"]
approve = {approve}
"#,
        root = dir.display()
    );
    std::fs::write(&config, text).unwrap();
    config
}

pub(super) fn runs(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("runs.txt")).unwrap_or_default()
}

#[test]
fn an_approval_pending_at_sigkill_is_asked_again_after_resume_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let (url, requests) = tool_calling_server();
    let config = write_config(dir.path(), &url);
    let session = dir.path().join("s.jsonl");

    // The first chat asks, and is killed while it waits for the answer.
    let mut first = Live::start(spawn_chat(&config, &session));
    first.send(b"clean up");
    let asked = first.wait_for("approve? > ");
    assert!(asked.contains("approve tool `shell`"), "{asked}");
    assert!(asked.contains("runs.txt"), "{asked}");
    let log = std::fs::read_to_string(&session).unwrap();
    assert!(log.contains(r#""type":"paused""#), "{log}");
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert_eq!(runs(dir.path()), "", "nothing ran before the answer");

    // The next chat resumes the log, asks again at the next message, and runs it once.
    let mut second = Live::start(spawn_chat(&config, &session));
    second.wait_for("paused for approval");
    second.send(b"go on");
    let asked = second.wait_for("approve? > ");
    assert!(asked.contains("runs.txt"), "{asked}");
    second.send(b"y");
    second.wait_for("done");
    second.send(b"/exit");
    let (_, stderr, status) = second.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(
        runs(dir.path()),
        "ran\n",
        "the approved command ran exactly once"
    );
    // The model saw the command's output before the new message.
    let last = requests.lock().unwrap().last().cloned().unwrap();
    let messages = last["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "tool");
    assert!(messages[n - 2]["content"].to_string().contains("once"));
    assert_eq!(messages[n - 1]["content"], "go on");

    // A third chat finds nothing paused and runs nothing again.
    let mut third = Live::start(spawn_chat(&config, &session));
    third.send(b"anything else?");
    third.wait_for("done");
    let (out, stderr, status) = third.finish();
    assert!(status.success(), "{stderr}");
    assert!(!out.contains("paused for approval"), "{out}");
    assert_eq!(runs(dir.path()), "ran\n");
}

#[test]
fn a_denial_in_the_chat_reaches_the_model_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (url, requests) = tool_calling_server();
    let config = write_config(dir.path(), &url);
    let mut live = Live::start(spawn_chat(&config, &dir.path().join("s.jsonl")));
    live.send(b"clean up");
    live.wait_for("approve? > ");
    live.send(b"maybe");
    live.wait_for("answer y, n [reason] or e");
    live.send(b"e");
    live.wait_for("arguments (JSON) > ");
    live.send(b"not json");
    let refused = live.wait_for("; try again");
    assert!(refused.contains("not a JSON object"), "{refused}");
    live.send(b"n keep the files");
    live.wait_for("done");
    let (_, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(runs(dir.path()), "");
    let last = requests.lock().unwrap().last().cloned().unwrap();
    let seen = last["messages"].to_string();
    assert!(seen.contains("keep the files"), "{seen}");
}
