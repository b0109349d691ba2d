//! `troupe chat` against a hostile model (#41): what the approval policy checks is exactly what
//! runs. A deny rule holds against arguments encoded twice and against the shell's own ways of
//! writing the same command; an answer given about one call never runs another.

use serde_json::{Value, json};

use super::support::chat::spawn_chat;
use super::support::chat::{server_calling, write_config_with};
use super::support::chat_live::Live;

const DENY_RM: &str = r#"[{ tool = "shell", argument = "command", prefix = "rm ", policy = "deny" },
  { tool = "shell", argument = "command", prefix = "sudo ", policy = "deny" }]"#;

fn call(id: &str, arguments: String) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "shell", "arguments": arguments}})
}

/// The model sends the arguments JSON-encoded twice: the registry would unwrap them and run
/// `rm`; the policy reads them the same way and denies.
#[test]
fn a_deny_rule_holds_against_arguments_encoded_twice() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("victim.txt"), "keep me").unwrap();
    let once = json!({"command": "rm victim.txt"}).to_string();
    let twice = Value::String(once).to_string();
    let (url, requests) = server_calling(json!([call("k1", twice)]));
    let config = write_config_with(dir.path(), &url, DENY_RM);
    let mut live = Live::start(spawn_chat(&config, &dir.path().join("s.jsonl")));
    live.send(b"clean up");
    live.wait_for("done");
    let (out, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
    assert!(!out.contains("approve?"), "{out}");
    assert!(dir.path().join("victim.txt").exists(), "the denied rm ran");
    let last = requests.lock().unwrap().last().cloned().unwrap();
    let seen = last["messages"].to_string();
    assert!(seen.contains("approval policy denies"), "{seen}");
}

/// Whitespace, path, wrapper and list variants of a denied command are denied too.
#[test]
fn a_deny_rule_holds_against_the_shells_ways_of_writing_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let variants = [
        "rm\t-rf v0.txt",
        "/bin/rm v1.txt",
        "true; rm v2.txt",
        "env sudo rm v3.txt",
        "echo ok && \\rm v4.txt",
    ];
    let calls: Vec<Value> = variants
        .iter()
        .enumerate()
        .map(|(i, command)| {
            std::fs::write(dir.path().join(format!("v{i}.txt")), "keep").unwrap();
            call(&format!("c{i}"), json!({ "command": command }).to_string())
        })
        .collect();
    let (url, requests) = server_calling(Value::Array(calls));
    let config = write_config_with(dir.path(), &url, DENY_RM);
    let mut live = Live::start(spawn_chat(&config, &dir.path().join("s.jsonl")));
    live.send(b"clean up");
    live.wait_for("done");
    let (_, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
    for (i, variant) in variants.iter().enumerate() {
        assert!(
            dir.path().join(format!("v{i}.txt")).exists(),
            "{variant:?} ran"
        );
    }
    let last = requests.lock().unwrap().last().cloned().unwrap();
    let denied = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool" && m["content"].to_string().contains("policy denies"))
        .count();
    assert_eq!(denied, variants.len(), "{last}");
}

/// Two calls of one answer share the id `dup`: each is asked about on its own, `y` runs the
/// call it was shown (`echo harmless`), `n` keeps the other from running, and each result goes
/// to its own call.
#[test]
fn an_approval_runs_the_call_it_was_shown_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("victim2.txt"), "keep me").unwrap();
    let (url, requests) = server_calling(json!([
        call("dup", json!({"command": "echo harmless"}).to_string()),
        call("dup", json!({"command": "rm victim2.txt"}).to_string()),
    ]));
    let config = write_config_with(dir.path(), &url, r#"[{ tool = "shell", policy = "ask" }]"#);
    let mut live = Live::start(spawn_chat(&config, &dir.path().join("s.jsonl")));
    live.send(b"clean up");
    let mut answered = Vec::new();
    for _ in 0..2 {
        let asked = live.wait_for("approve? > ");
        let shown = asked
            .lines()
            .rev()
            .find(|l| l.contains("approve tool"))
            .unwrap();
        if shown.contains("harmless") {
            live.send(b"y");
            answered.push("harmless");
        } else {
            assert!(shown.contains("victim2"), "{asked}");
            live.send(b"n not this one");
            answered.push("rm");
        }
    }
    answered.sort_unstable();
    assert_eq!(
        answered,
        ["harmless", "rm"],
        "each call was asked about once"
    );
    live.wait_for("done");
    let (out, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
    assert!(!out.contains("no tool call waits"), "{out}");
    assert!(
        dir.path().join("victim2.txt").exists(),
        "the denied call ran"
    );
    let last = requests.lock().unwrap().last().cloned().unwrap();
    let messages = last["messages"].as_array().unwrap();
    let assistant = messages
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap();
    let ids: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(
        ids[0], ids[1],
        "the calls went back to the model under one id"
    );
    let result_of = |id: &str| {
        messages
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .map(|m| m["content"].to_string())
            .unwrap()
    };
    assert!(result_of(ids[0]).contains("harmless"), "{last}");
    assert!(result_of(ids[1]).contains("not this one"), "{last}");
}
