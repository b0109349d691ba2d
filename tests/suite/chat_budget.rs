//! `troupe chat` and a budget that pauses (#33, `on_exceeded = "pause"`): the chat says the
//! request paused and asks for new limits; too low a limit is refused, an empty line ends the
//! request (keeping it), a raised limit lets the paused request go on to its answer; two
//! budgets spent by one call are asked about one after the other.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::support::chat::{completions_server, spawn_chat};
use super::support::chat_live::Live;
use super::support::chat_server::ChatServer;

/// Every answer of the server spends 2 output tokens: the agent's budget of 2 is spent after
/// its first answer.
fn write_config(dir: &Path, url: &str) -> std::path::PathBuf {
    let config = dir.join("troupe.toml");
    let text = format!(
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
budget = {{ agent = {{ output_tokens = 2 }}, on_exceeded = "pause" }}
"#
    );
    std::fs::write(&config, text).unwrap();
    config
}

#[test]
fn a_paused_request_is_ended_or_raised_from_the_chat() {
    let dir = tempfile::tempdir().unwrap();
    let server = ChatServer::start();
    let config = write_config(dir.path(), &server.url);
    let session = dir.path().join("s.jsonl");
    let mut live = Live::start(spawn_chat(&config, &session));
    live.send(b"hi");
    live.wait_for("reply 1");

    // Spent: the next request pauses before its model call; an empty line ends it.
    live.send(b"again");
    let asked = live.wait_for("raise? > ");
    assert!(asked.contains("[paused: agent budget exceeded"), "{asked}");
    assert!(asked.contains("raise the agent budget?"), "{asked}");
    live.send(b"");
    live.wait_for("(request ended: its budget is spent; what it did is kept)");
    assert_eq!(server.count(), 1);

    // The next one pauses too; a limit still reached is refused, a higher one goes on.
    live.send(b"once more");
    live.wait_for("raise? > ");
    live.send(b"output_tokens=2");
    live.wait_for("give a higher one");
    live.send(b"output_tokens=100");
    let raised = live.wait_for("reply 2");
    assert!(
        raised.contains("[agent budget raised to 100 output tokens]"),
        "{raised}"
    );
    live.send(b"/exit");
    let (_, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
    // The ended request was kept: the model saw it before the raised one.
    assert_eq!(server.count(), 2);
    assert_eq!(
        server.dialogue(1),
        ["hi", "reply 1", "again", "once more"],
        "{:?}",
        server.request(1)
    );
}

/// An OpenAI-compatible server whose model reads `a.txt` when the last message is the user's,
/// and otherwise answers `read N`; every answer spends 2 output tokens. Keeps the requests.
fn reading_server() -> (String, Arc<Mutex<Vec<Value>>>) {
    completions_server(|request, n| {
        let from_user = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "user");
        if from_user {
            let call = json!({
                "id": "call_read", "type": "function",
                "function": {"name": "read_file", "arguments": r#"{"path": "a.txt"}"#}
            });
            let message = json!({"role": "assistant", "content": null, "tool_calls": [call]});
            (message, "tool_calls")
        } else {
            (
                json!({"role": "assistant", "content": format!("read {n}")}),
                "stop",
            )
        }
    })
}

#[test]
fn two_budgets_spent_by_one_call_are_each_asked_about() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let (url, requests) = reading_server();
    let config = dir.path().join("troupe.toml");
    // The tool call's 2 output tokens spend the request's budget and the agent's at once.
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
tools = ["read_file"]
budget = {{ request = {{ output_tokens = 2 }}, agent = {{ output_tokens = 2 }}, on_exceeded = "pause", pause_timeout_secs = 30 }}
"#,
        root = dir.path().display()
    );
    std::fs::write(&config, text).unwrap();
    let session = dir.path().join("s.jsonl");
    let mut live = Live::start(spawn_chat(&config, &session));
    live.send(b"what does a.txt say?");
    let asked = live.wait_for("raise? > ");
    assert!(asked.contains("raise the request budget?"), "{asked}");
    live.send(b"output_tokens=100");
    // The agent's budget is still spent: the chat asks about it too, instead of waiting.
    let asked = live.wait_for("raise? > ");
    assert!(
        asked.contains("[request budget raised to 100 output tokens]"),
        "{asked}"
    );
    assert!(asked.contains("[paused: agent budget exceeded"), "{asked}");
    assert!(asked.contains("raise the agent budget?"), "{asked}");
    assert_eq!(requests.lock().unwrap().len(), 1);
    live.send(b"output_tokens=100");
    let raised = live.wait_for("read 2");
    assert!(
        raised.contains("[agent budget raised to 100 output tokens]"),
        "{raised}"
    );
    live.send(b"/exit");
    let (_, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(requests.lock().unwrap().len(), 2);
}
