//! `troupe chat` and a budget that pauses (#33, `on_exceeded = "pause"`): the chat says the
//! request paused and asks for new limits; too low a limit is refused, an empty line ends the
//! request (keeping it), a raised limit lets the paused request go on to its answer.

use std::path::Path;

use super::chat::spawn_chat;
use super::chat_live::Live;
use super::chat_server::ChatServer;

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
