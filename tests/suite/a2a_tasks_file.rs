//! `troupe a2a serve --tasks FILE` (#52), through the real binary: the journal of finished
//! tasks starts past a line torn inside a UTF-8 character, is private (0600), writes its
//! rewrite to a temporary file of its own naming (an unrelated `NAME.tmp` beside it is left
//! alone), has one writer (a second server on the file is refused, naming the first), refuses
//! a FIFO or a symbolic link before READY instead of hanging on or following it, and stays
//! bounded by what the server keeps while it runs.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::support::a2a_process::{A2aProcess, message};
use super::support::chat::{completions_server, write_config};

fn answering(dir: &Path) -> std::path::PathBuf {
    let (url, _) = completions_server(|_, n| {
        (
            json!({"role": "assistant", "content": format!("done {n}")}),
            "stop",
        )
    });
    write_config(dir, &url)
}

/// `troupe a2a serve --tasks FILE`'s exit status and standard error when it must refuse to
/// start: within a minute (a start that hangs fails the test).
fn refused(config: &Path, file: &Path) -> String {
    let mut child = A2aProcess::command(config, &["--tasks", file.to_str().unwrap()], &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                !status.success() && !stdout.contains("READY"),
                "it started: {stdout}"
            );
            return String::from_utf8_lossy(&out.stderr).into_owned();
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!(
                "troupe a2a serve --tasks {} still starting after 60 s",
                file.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_tasks_file_starts_past_a_torn_character_and_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let config = answering(dir.path());
    let file = dir.path().join("tasks.jsonl");
    let tasks = ["--tasks", file.to_str().unwrap()];
    let unrelated = dir.path().join("tasks.tmp");
    std::fs::write(&unrelated, "someone else's").unwrap();
    let id = {
        let server = A2aProcess::start(&config, &tasks, &[]);
        let sent = server.rpc("assistant", "SendMessage", message("café", None, None));
        sent["result"]["task"]["id"].as_str().unwrap().to_string()
    };
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the tasks file is {mode:o}");
    // A write cut inside a character: the last line ends with half of "é".
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    out.write_all(b"{\"agent\": \"assistant\", \"task\": {\"id\": \"caf\xc3")
        .unwrap();
    drop(out);
    let server = A2aProcess::start(&config, &tasks, &[]);
    let got = server.rpc("assistant", "GetTask", json!({"id": id}));
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    assert_eq!(
        std::fs::read_to_string(&unrelated).unwrap(),
        "someone else's"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the rewritten tasks file is {mode:o}");
}

#[test]
fn a_second_server_on_the_tasks_file_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let config = answering(dir.path());
    let file = dir.path().join("tasks.jsonl");
    let first = A2aProcess::start(&config, &["--tasks", file.to_str().unwrap()], &[]);
    let said = refused(&config, &file);
    assert!(said.contains("in use"), "{said}");
    assert!(said.contains(&first.child.id().to_string()), "{said}");
    // The first still serves.
    let sent = first.rpc("assistant", "SendMessage", message("hello", None, None));
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
}

#[test]
fn a_fifo_or_a_symbolic_link_is_refused_before_ready() {
    let dir = tempfile::tempdir().unwrap();
    let config = answering(dir.path());
    let fifo = dir.path().join("fifo.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let said = refused(&config, &fifo);
    assert!(said.contains("FIFO"), "{said}");
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "victim").unwrap();
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let said = refused(&config, &link);
    assert!(said.contains("symbolic link"), "{said}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Nor is its lock note followed: one planted as a link to another file is refused too.
    let file = dir.path().join("tasks.jsonl");
    std::os::unix::fs::symlink(&victim, dir.path().join("tasks.jsonl.lock")).unwrap();
    let said = refused(&config, &file);
    assert!(said.contains("tasks.jsonl.lock"), "{said}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim");
}

#[test]
fn the_tasks_file_stays_bounded_while_the_server_runs() {
    let dir = tempfile::tempdir().unwrap();
    let config = answering(dir.path());
    let file = dir.path().join("tasks.jsonl");
    let server = A2aProcess::start(&config, &["--tasks", file.to_str().unwrap()], &[]);
    // Fifteen 7 MiB files attached to messages (the model sees only their names): 105 MiB
    // sent, more than the server keeps of finished tasks (64 MiB).
    let attachment = "A".repeat(7 << 20);
    for n in 0..15 {
        let mut sent = message(&format!("file {n}"), None, None);
        sent["message"]["parts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"raw": attachment, "filename": format!("f{n}.bin")}));
        let answer = server.rpc("assistant", "SendMessage", sent);
        assert_eq!(
            answer["result"]["task"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    }
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(
        size <= 80 << 20,
        "the tasks file holds {} MiB after 105 MiB of messages",
        size >> 20
    );
}
