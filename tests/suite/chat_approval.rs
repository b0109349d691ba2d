//! `troupe chat` and tool approval (#33): the chat asks y/n/edit about a call the agent's policy
//! pauses on; a chat killed with SIGKILL while it asks resumes from its session log, asks again
//! at the next message, and the approved command runs exactly once.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::support::chat::{
    completions_server, runs, server_calling, spawn_chat, write_config_with,
};
use super::support::chat_live::Live;

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

fn write_config(dir: &Path, url: &str) -> std::path::PathBuf {
    write_config_with(
        dir,
        url,
        r#"[{ tool = "shell", argument = "command", prefix = "echo ", policy = "ask" }]"#,
    )
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
    second.wait_for("the request in flight before the restart answered: done");
    second.wait_for("done");
    second.send(b"/exit");
    let (_, stderr, status) = second.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(
        runs(dir.path()),
        "ran\n",
        "the approved command ran exactly once"
    );
    // The model saw the command's output, finishing the request in flight (durable steps),
    // before the new message.
    let sent = requests.lock().unwrap().clone();
    let resumed = sent[sent.len() - 2]["messages"].as_array().unwrap();
    let result = resumed.last().unwrap();
    assert_eq!(result["role"], "tool");
    assert!(result["content"].to_string().contains("once"));
    let messages = sent.last().unwrap()["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "assistant");
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

/// Models reuse call ids across turns (many number each answer's calls from `call_0`). The
/// person's `y` to a question whose call timed out meanwhile must not approve the next call,
/// which the same model call id names: the chat says the answer decided nothing, then asks about
/// the next call.
#[test]
fn a_yes_typed_after_its_call_timed_out_never_approves_the_next_call_under_the_same_model_id() {
    let dir = tempfile::tempdir().unwrap();
    let call = |command: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_0", "type": "function",
            "function": {"name": "shell", "arguments": json!({"command": command}).to_string()}
        }]})
    };
    let (first, second) = ("echo first >> runs.txt", "echo second >> runs.txt");
    let (url, _) = completions_server(move |_, n| match n {
        1 => (call(first), "tool_calls"),
        2 => (call(second), "tool_calls"),
        n => (
            json!({"role": "assistant", "content": format!("done {n}")}),
            "stop",
        ),
    });
    // The first call's wait runs out while the person still reads its question.
    let config = write_config_with(
        dir.path(),
        &url,
        "[{ tool = \"shell\", argument = \"command\", prefix = \"echo \", policy = \"ask\" }]\n\
         approve_timeout_secs = 2",
    );
    let session = dir.path().join("s.jsonl");
    let mut live = Live::start(spawn_chat(&config, &session));
    live.send(b"clean up");
    let asked = live.wait_for("approve? > ");
    assert!(asked.contains("echo first"), "{asked}");
    // The second call waits once the log shows its pause (written just before it is asked).
    let deadline = std::time::Instant::now() + super::support::chat_live::DEADLINE;
    while std::fs::read_to_string(&session)
        .unwrap_or_default()
        .matches(r#""ask":true"#)
        .count()
        < 2
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the second call was never asked"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    live.send(b"y");
    let refused = live.wait_for("approve? > ");
    assert!(refused.contains("no tool call waits"), "{refused}");
    assert!(refused.contains("echo second"), "{refused}");
    live.send(b"n not that either");
    live.wait_for("done 3");
    let (_, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(runs(dir.path()), "", "neither call was approved");
}
