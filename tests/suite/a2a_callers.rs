//! A task belongs to its context and its caller (#52), through the real binary: an answer that
//! names another context decides nothing, and a caller (a key of its own) reaches only its own
//! tasks — listing, reading, cancelling, subscribing to or answering another's is as if it did
//! not exist — while its own contextIds never reach another caller's conversation.

use std::path::Path;

use serde_json::{Value, json};

use super::support::a2a_process::{A2aProcess, message};
use super::support::chat::{runs, server_calling, write_config_with};

/// The command the model asks to run: it leaves one line in `runs.txt` per run.
const COMMAND: &str = "echo ran >> runs.txt && echo once";

/// A config whose `assistant` asks to run [`COMMAND`] (asked about first) on "clean up", and
/// answers `done N` otherwise.
fn asking(dir: &Path) -> std::path::PathBuf {
    let (url, _) = server_calling(json!([{
        "id": "call_rm", "type": "function",
        "function": {"name": "shell", "arguments": json!({"command": COMMAND}).to_string()}
    }]));
    write_config_with(
        dir,
        &url,
        r#"[{ tool = "shell", argument = "command", prefix = "echo ", policy = "ask" }]"#,
    )
}

fn task(answer: &Value) -> &Value {
    &answer["result"]["task"]
}

/// `answer`'s JSON-RPC error code.
fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

#[test]
fn an_answer_naming_another_context_decides_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = asking(dir.path());
    let server = A2aProcess::start(
        &config,
        &["--key-env", "TEST_A2A_KEY"],
        &[("TEST_A2A_KEY", "the-one-key")],
    )
    .with_key("the-one-key");
    let asked = server.rpc("assistant", "SendMessage", message("clean up", None, None));
    let paused = task(&asked);
    assert_eq!(
        paused["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    let (id, context) = (
        paused["id"].as_str().unwrap(),
        paused["contextId"].as_str().unwrap(),
    );
    // A `yes` on the task under another context: refused, and the call still waits.
    let elsewhere = server.rpc(
        "assistant",
        "SendMessage",
        message("yes", Some("another-context"), Some(id)),
    );
    assert_eq!(error_code(&elsewhere), -32602, "{elsewhere}");
    assert!(elsewhere.to_string().contains("contextId"), "{elsewhere}");
    let still = server.rpc("assistant", "GetTask", json!({"id": id}));
    assert_eq!(
        still["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{still}"
    );
    assert_eq!(runs(dir.path()), "", "the call ran");
    // Its own context (or none: inferred from the task) answers it.
    let answered = server.rpc(
        "assistant",
        "SendMessage",
        message("yes", Some(context), Some(id)),
    );
    assert_eq!(
        task(&answered)["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{answered}"
    );
    assert_eq!(runs(dir.path()), "ran\n");
}

#[test]
fn a_caller_reaches_only_its_own_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let config = asking(dir.path());
    let (alice, bob) = ("alice-key-0123456789", "bob-key-9876543210");
    let server = A2aProcess::start(
        &config,
        &["--key-env", "ALICE_A2A_KEY", "--key-env", "BOB_A2A_KEY"],
        &[("ALICE_A2A_KEY", alice), ("BOB_A2A_KEY", bob)],
    );
    let as_alice =
        |method: &str, params: Value| server.rpc_as(Some(alice), "assistant", method, params);
    let as_bob =
        |method: &str, params: Value| server.rpc_as(Some(bob), "assistant", method, params);
    let asked = as_alice("SendMessage", message("clean up", Some("ctx-1"), None));
    let paused = task(&asked).clone();
    assert_eq!(
        paused["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    let id = paused["id"].as_str().unwrap();
    // Bob finds nothing of Alice's, however he asks.
    for params in [
        json!({}),
        json!({"status": "TASK_STATE_INPUT_REQUIRED"}),
        json!({"contextId": "ctx-1"}),
    ] {
        let listed = as_bob("ListTasks", params.clone());
        assert_eq!(listed["result"]["totalSize"], 0, "{params}: {listed}");
    }
    for (method, params) in [
        ("GetTask", json!({"id": id})),
        ("CancelTask", json!({"id": id})),
        ("SubscribeToTask", json!({"id": id})),
        ("SendMessage", message("yes", None, Some(id))),
        ("SendMessage", message("yes", Some("ctx-1"), Some(id))),
    ] {
        let answer = as_bob(method, params);
        assert_eq!(error_code(&answer), -32001, "{method}: {answer}");
    }
    assert_eq!(runs(dir.path()), "", "Bob's yes ran Alice's call");
    // Bob's `ctx-1` is a conversation of his own: Alice's is not reached, nor listed to him.
    let own = as_bob("SendMessage", message("hello", Some("ctx-1"), None));
    assert_eq!(
        task(&own)["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{own}"
    );
    assert_eq!(as_bob("ListTasks", json!({}))["result"]["totalSize"], 1);
    let alices = as_alice("ListTasks", json!({"contextId": "ctx-1"}));
    assert_eq!(alices["result"]["totalSize"], 1, "{alices}");
    assert_eq!(alices["result"]["tasks"][0]["id"], id, "{alices}");
    // Alice answers her own.
    let got = as_alice("GetTask", json!({"id": id}));
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{got}"
    );
    let answered = as_alice("SendMessage", message("yes", None, Some(id)));
    assert_eq!(
        task(&answered)["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{answered}"
    );
    assert_eq!(runs(dir.path()), "ran\n");
}
