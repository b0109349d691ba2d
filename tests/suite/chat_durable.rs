//! Durable steps through `troupe chat` (#46): a ten-step request — its user message, five model
//! calls and four tool runs — killed with SIGKILL at each step and restarted finishes with every
//! model call answered once and every tool run once; a tool killed mid-run is reported to the
//! model as interrupted, never run again; the log loads (`troupe session show`).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::support::chat::{runs, spawn_chat, write_config_with};
use super::support::chat_live::Live;
use super::support::ten_steps::{ANSWER, CALLS, Calls, call_number, server, wait_until};

/// Kill the chat running the request at step `step` (1–10): after the step is committed and
/// while the next is under way — a model call in flight (odd steps), a tool running (even
/// steps), or, at 10, after the answer.
fn kill_at(step: usize, dir: &Path, config: &Path, session: &Path, calls: &Calls) {
    let tool = (step.is_multiple_of(2) && step < 10).then_some(step / 2);
    if !step.is_multiple_of(2) {
        calls.hold.store(step.div_ceil(2), Ordering::SeqCst);
    }
    if let Some(j) = tool {
        std::fs::write(dir.join(format!("hold-{j}")), "").unwrap();
    }
    let mut live = Live::start(spawn_chat(config, session));
    live.send(b"go");
    match tool {
        Some(j) => wait_until(&format!("tool {j} runs"), || {
            runs(dir).contains(&format!("t{j}\n"))
        }),
        None if step == 10 => {
            live.wait_for(ANSWER);
        }
        None => wait_until("the model call is held", || {
            calls.holding.load(Ordering::SeqCst)
        }),
    }
    live.child.kill().unwrap();
    live.child.wait().unwrap();
    calls.release.store(true, Ordering::SeqCst);
    if let Some(j) = tool {
        // A second run would hold no longer: it would show as a second line instead.
        std::fs::remove_file(dir.join(format!("hold-{j}"))).unwrap();
    }
}

#[test]
fn a_request_killed_at_each_step_finishes_after_a_restart_with_no_step_done_twice() {
    for step in 1..=10 {
        let dir = tempfile::tempdir().unwrap();
        let calls = Arc::new(Calls::default());
        let (url, requests) = server(calls.clone());
        let config = write_config_with(dir.path(), &url, "[]");
        let session = dir.path().join("s.jsonl");
        kill_at(step, dir.path(), &config, &session, &calls);

        let mut live = Live::start(spawn_chat(&config, &session));
        if step < 10 {
            live.wait_for("resuming the request in flight");
            live.wait_for(ANSWER);
        }
        live.send(b"/exit");
        let (out, stderr, status) = live.finish();
        assert!(status.success(), "step {step}: {out}\n{stderr}");

        let answered = *calls.answered.lock().unwrap();
        assert_eq!(
            answered, [1; CALLS],
            "step {step}: each model call answered once"
        );
        let ran = runs(dir.path());
        let expected: String = (1..CALLS).map(|j| format!("t{j}\n")).collect();
        assert_eq!(ran, expected, "step {step}: each tool ran once");
        if step.is_multiple_of(2) && step < 10 {
            // The tool killed mid-run is answered as interrupted in the next model call.
            let j = step / 2;
            let sent = requests.lock().unwrap();
            let next = sent.iter().rev().find(|r| call_number(r) == j + 1).unwrap();
            let result = next["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["tool_call_id"] == format!("k{j}"))
                .unwrap();
            assert!(
                result["content"]
                    .as_str()
                    .unwrap()
                    .contains("not run again"),
                "step {step}: {result}"
            );
        }
        let show = Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args(["session", "show"])
            .arg(&session)
            .output()
            .unwrap();
        let listed = String::from_utf8_lossy(&show.stdout);
        assert!(show.status.success(), "step {step}: the log does not load");
        assert!(!listed.contains("in flight"), "step {step}: {listed}");
        assert_eq!(
            listed.matches("model call").count(),
            CALLS,
            "step {step}: {listed}"
        );
    }
}

fn troupe(args: &[&str], log: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["session", args[0]])
        .arg(log)
        .args(&args[1..])
        .output()
        .unwrap()
}

#[test]
fn a_fork_at_a_step_continues_in_chat_and_a_bad_step_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(Calls::default());
    let (url, _) = server(calls.clone());
    let config = write_config_with(dir.path(), &url, "[]");
    let session = dir.path().join("s.jsonl");
    let mut live = Live::start(spawn_chat(&config, &session));
    live.send(b"go");
    live.wait_for(ANSWER);
    live.send(b"/exit");
    assert!(live.finish().2.success());
    let original = std::fs::read(&session).unwrap();

    let shown = troupe(&["show"], &session);
    assert!(shown.status.success());
    let listed = String::from_utf8_lossy(&shown.stdout).into_owned();
    for kind in ["request", "model call", "tool call", "request end"] {
        assert!(listed.contains(kind), "{kind}: {listed}");
    }
    // The step of the model's second answer: tool 2 was asked for, not yet run.
    let second_call = listed
        .lines()
        .filter(|l| l.contains("model call"))
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let fork = dir.path().join("fork.jsonl");
    let fork_arg = fork.to_str().unwrap();

    let bad = troupe(&["fork", "--at", "999", "--out", fork_arg], &session);
    assert!(!bad.status.success());
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(said.contains("has no step 999"), "{said}");
    let bad = troupe(&["fork", "--at", "m2", "--out", fork_arg], &session);
    assert!(!bad.status.success());
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(said.contains("`m2` is not a step id"), "{said}");

    // A new log that is the original — by its path, a symbolic link, a hard link — or one in
    // a directory that does not exist is refused, and nothing is written.
    let symlink = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&session, &symlink).unwrap();
    let hard = dir.path().join("hard.jsonl");
    std::fs::hard_link(&session, &hard).unwrap();
    for out in [&session, &symlink, &hard] {
        let bad = troupe(
            &["fork", "--at", "2", "--out", out.to_str().unwrap()],
            &session,
        );
        assert!(!bad.status.success());
        let said = String::from_utf8_lossy(&bad.stderr);
        assert!(said.contains("exists already"), "{said}");
        assert_eq!(std::fs::read(&session).unwrap(), original);
    }
    let nowhere = dir.path().join("no/such/fork.jsonl");
    let bad = troupe(
        &["fork", "--at", "2", "--out", nowhere.to_str().unwrap()],
        &session,
    );
    assert!(!bad.status.success());
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(said.contains("does not exist"), "{said}");
    assert!(!dir.path().join("no").exists());

    let forked = troupe(&["fork", "--at", &second_call, "--out", fork_arg], &session);
    let said = String::from_utf8_lossy(&forked.stdout);
    assert!(forked.status.success(), "{said}");
    assert!(said.contains("in flight"), "{said}");
    // The step it ends at is named, as `show` lists it.
    assert!(said.contains("(model call: calls"), "{said}");
    let again = troupe(&["fork", "--at", "1", "--out", fork_arg], &session);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists already"));
    assert_eq!(
        std::fs::read(&session).unwrap(),
        original,
        "the original changed"
    );

    // The fork continues from its step: tools 2 to 4 run again there, the request answers.
    let mut live = Live::start(spawn_chat(&config, &fork));
    live.wait_for("resuming the request in flight");
    live.wait_for(ANSWER);
    // A chat holding a log keeps forks out of it until it is done.
    let held = troupe(
        &[
            "fork",
            "--at",
            "1",
            "--out",
            dir.path().join("x.jsonl").to_str().unwrap(),
        ],
        &fork,
    );
    assert!(!held.status.success());
    assert!(String::from_utf8_lossy(&held.stderr).contains("in use"));
    live.send(b"/exit");
    assert!(live.finish().2.success());
    assert_eq!(runs(dir.path()), "t1\nt2\nt3\nt4\nt2\nt3\nt4\n");
    assert_eq!(
        std::fs::read(&session).unwrap(),
        original,
        "the original changed"
    );
}
