//! `troupe chat` as the suites run it: the command, its configuration files, and a model server
//! that calls tools.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::chat_server::read_request;

/// `troupe chat` on `config` and `session`, with piped standard streams.
pub(crate) fn spawn_chat(config: &Path, session: &Path) -> Child {
    chat_command(config, session).spawn().unwrap()
}

/// The command [`spawn_chat`] runs.
pub(crate) fn chat_command(config: &Path, session: &Path) -> Command {
    chat_command_of(Path::new(env!("CARGO_BIN_EXE_troupe")), config, session)
}

/// [`chat_command`] with the `troupe` binary at `program` (a copy where another user can run it).
pub(crate) fn chat_command_of(program: &Path, config: &Path, session: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .args(["chat", "--config"])
        .arg(config)
        .arg("--session")
        .arg(session)
        .env("TEST_CHAT_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

pub(crate) fn write_config(dir: &Path, url: &str) -> std::path::PathBuf {
    let config = dir.join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[models.remote]
provider = "openai"
base_url = "{url}"
api_key_env = "TEST_CHAT_KEY"
model = "test-model"
context_window = 8000

[agents.assistant]
model = "remote"
instructions = "Be brief."
"#
        ),
    )
    .unwrap();
    config
}

/// An OpenAI-compatible server whose model answers the user's "clean up" with `tool_calls`
/// (exactly as given: a hostile model's ids and arguments included), and anything else with
/// `done N`. Keeps the request bodies.
pub(crate) fn server_calling(tool_calls: Value) -> (String, Arc<Mutex<Vec<Value>>>) {
    completions_server(move |request, n| {
        let last = request["messages"]
            .as_array()
            .and_then(|m| m.last().cloned())
            .unwrap_or_default();
        if last["role"] == "user" && last["content"] == "clean up" {
            let message = json!({"role": "assistant", "content": null, "tool_calls": tool_calls});
            (message, "tool_calls")
        } else {
            (
                json!({"role": "assistant", "content": format!("done {n}")}),
                "stop",
            )
        }
    })
}

/// An OpenAI-compatible (non-streaming) server answering the `n`-th request (from 1) with the
/// assistant message and finish reason `answer` gives; every answer reports 10 prompt and 2
/// completion tokens. Keeps the request bodies.
pub(crate) fn completions_server(
    answer: impl Fn(&Value, usize) -> (Value, &'static str) + Send + 'static,
) -> (String, Arc<Mutex<Vec<Value>>>) {
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
            let n = {
                let mut seen = seen.lock().unwrap();
                seen.push(request.clone());
                seen.len()
            };
            let (message, finish) = answer(&request, n);
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

/// A chat configuration for the model at `url` with the `shell` tool and these `approve` rules
/// (TOML).
pub(crate) fn write_config_with(dir: &Path, url: &str, approve: &str) -> std::path::PathBuf {
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

pub(crate) fn runs(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("runs.txt")).unwrap_or_default()
}

/// An OpenAI-compatible server whose model runs `commands` with the `shell` tool, one per turn
/// (`call_1`, `call_2`, …), then answers `done`. Keeps the request bodies.
pub(crate) fn server_running_commands(commands: Vec<String>) -> (String, Arc<Mutex<Vec<Value>>>) {
    completions_server(move |_, n| match commands.get(n - 1) {
        Some(command) => {
            let call = json!({
                "id": format!("call_{n}"), "type": "function",
                "function": {"name": "shell", "arguments": json!({"command": command}).to_string()}
            });
            (
                json!({"role": "assistant", "content": null, "tool_calls": [call]}),
                "tool_calls",
            )
        }
        None => (json!({"role": "assistant", "content": "done"}), "stop"),
    })
}

/// The tool results the model was sent, in order, as the last request shows them.
pub(crate) fn shell_results(requests: &[Value]) -> Vec<String> {
    requests
        .last()
        .and_then(|r| r["messages"].as_array())
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}
