//! Calls paused for approval belong to their conversation and their log (#41): `/clear` drops
//! them, `/resume` never carries them into another log, and every log still loads after. And a
//! tool's command dies with the `troupe chat` that ran it, SIGKILL included.

use std::path::Path;

use serde_json::json;

use super::support::chat::spawn_chat;
use super::support::chat::{runs, server_calling, write_config_with};
use super::support::chat_live::Live;

const COMMAND: &str = "echo ran >> runs.txt";
const ASK_ECHO: &str =
    r#"[{ tool = "shell", argument = "command", prefix = "echo ", policy = "ask" }]"#;

fn server() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
) {
    server_calling(json!([{
        "id": "k1", "type": "function",
        "function": {"name": "shell", "arguments": json!({"command": COMMAND}).to_string()}
    }]))
}

/// A chat on `session` that asks about the call and is killed at the question.
fn pause_and_kill(config: &Path, session: &Path) {
    let mut first = Live::start(spawn_chat(config, session));
    first.send(b"clean up");
    first.wait_for("approve? > ");
    first.child.kill().unwrap();
    first.child.wait().unwrap();
}

/// A chat on `session` that starts, says whether the log ends paused, and exits cleanly.
fn reopen(config: &Path, session: &Path) -> String {
    let mut live = Live::start(spawn_chat(config, session));
    live.send(b"/exit");
    let (out, stderr, status) = live.finish();
    assert!(status.success(), "{session:?} no longer loads: {stderr}");
    out
}

#[test]
fn clear_after_a_resumed_pause_drops_the_paused_call_and_the_log_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let (url, requests) = server();
    let config = write_config_with(dir.path(), &url, ASK_ECHO);
    let session = dir.path().join("s.jsonl");
    pause_and_kill(&config, &session);

    let mut second = Live::start(spawn_chat(&config, &session));
    second.wait_for("paused for approval");
    second.send(b"/clear");
    let cleared = second.wait_for("(conversation cleared");
    second.wait_for("dropped with it, not run");
    assert!(!cleared.contains("approve?"), "{cleared}");
    second.send(b"hello");
    second.wait_for("done");
    second.send(b"/exit");
    let (out, stderr, status) = second.finish();
    assert!(status.success(), "{stderr}");
    assert!(
        !out.contains("approve?"),
        "the cleared call was asked about again: {out}"
    );
    assert_eq!(runs(dir.path()), "", "the cleared call ran");
    // The model was sent the new conversation only: no tool result without its call.
    let last = requests.lock().unwrap().last().cloned().unwrap();
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert!(!roles.contains(&"tool"), "{roles:?}");
    assert_eq!(roles.last(), Some(&"user"));
    let out = reopen(&config, &session);
    assert!(!out.contains("paused for approval"), "{out}");
}

#[test]
fn resume_leaves_a_paused_call_in_its_own_log() {
    let dir = tempfile::tempdir().unwrap();
    let (url, requests) = server();
    let config = write_config_with(dir.path(), &url, ASK_ECHO);
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    // B: a finished conversation.
    let mut live = Live::start(spawn_chat(&config, &b));
    live.send(b"hello");
    live.wait_for("done");
    live.send(b"/exit");
    assert!(live.finish().2.success());
    // A: paused at the question, then killed.
    pause_and_kill(&config, &a);

    let mut chat = Live::start(spawn_chat(&config, &a));
    chat.wait_for("paused for approval");
    chat.send(format!("/resume {}", b.display()).as_bytes());
    chat.wait_for("resumed");
    chat.send(b"go on");
    chat.wait_for("done");
    chat.send(b"/exit");
    let (out, stderr, status) = chat.finish();
    assert!(status.success(), "{stderr}");
    assert!(
        !out.contains("approve?"),
        "A's call was asked about in B: {out}"
    );
    assert_eq!(runs(dir.path()), "", "A's call ran in B");
    let last = requests.lock().unwrap().last().cloned().unwrap();
    assert!(!last["messages"].to_string().contains("k1"), "{last}");
    // B loads and has nothing paused; A still waits for its answer.
    assert!(!reopen(&config, &b).contains("paused for approval"));
    assert!(reopen(&config, &a).contains("paused for approval"));
}

/// Whether process `pid` is gone (or a zombie nobody has reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn a_running_command_dies_with_a_killed_chat() {
    let dir = tempfile::tempdir().unwrap();
    let command = "sleep 300 & printf %s $! > bg.pid; wait";
    let (url, _) = server_calling(json!([{
        "id": "k1", "type": "function",
        "function": {"name": "shell", "arguments": json!({ "command": command }).to_string()}
    }]));
    let config = write_config_with(dir.path(), &url, "[]");
    let mut live = Live::start(spawn_chat(&config, &dir.path().join("s.jsonl")));
    live.send(b"clean up");
    let pid_file = dir.path().join("bg.pid");
    let read_pid = || {
        std::fs::read_to_string(&pid_file)
            .ok()?
            .trim()
            .parse::<u32>()
            .ok()
    };
    let waited = std::time::Instant::now();
    let pid = loop {
        if let Some(pid) = read_pid() {
            break pid;
        }
        assert!(waited.elapsed().as_secs() < 60, "the command never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(!gone(pid));
    live.child.kill().unwrap();
    live.child.wait().unwrap();
    let killed = std::time::Instant::now();
    while !gone(pid) {
        if killed.elapsed().as_secs() >= 30 {
            // Leave no orphan behind either way.
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            panic!("the command's process {pid} outlived the killed chat");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
