//! Sessions survive an agent process killed with SIGKILL in the middle of a turn, and one
//! process's open log keeps every other process out, whatever name it is reached by.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;

use troupe::agents::{AgentSpec, CompactionSettings, spawn_agent};
use troupe::models::ScriptedModel;
use troupe::session::{SessionLog, load};
use troupe::{ChatMessage, Team, TeamConfig};

const CHILD_ENV: &str = "TROUPE_TEST_SESSION_CHILD";
const HOLDER_ENV: &str = "TROUPE_TEST_SESSION_HOLDER";

/// Not a test on its own: the child process of the lock test. Holds the session log named by
/// its environment open, says so on stdout, and lets go when its stdin closes.
#[test]
#[ignore = "run by another_process_is_kept_out_through_a_symbolic_or_hard_link"]
fn session_holder_child() {
    use std::io::Read as _;
    let Some(path) = std::env::var_os(HOLDER_ENV) else {
        return;
    };
    let (_log, _) = SessionLog::open(Path::new(&path)).unwrap();
    println!("holding the session");
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
}

#[cfg(unix)]
#[test]
fn another_process_is_kept_out_through_a_symbolic_or_hard_link() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.jsonl");
    std::fs::write(&path, "").unwrap();
    let symlink = dir.path().join("symlink.jsonl");
    std::os::unix::fs::symlink(&path, &symlink).unwrap();
    let hard_link = dir.path().join("hard.jsonl");
    std::fs::hard_link(&path, &hard_link).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::session::session_holder_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLDER_ENV, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("holding the session") {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the holder ended early"
        );
    }
    for name in [&path, &symlink] {
        let error = SessionLog::open(name).map(|_| ()).unwrap_err().to_string();
        let expected = format!(
            "session {} is in use by process {}",
            name.display(),
            child.id()
        );
        assert_eq!(error, expected);
    }
    // A hard link has a name of its own, so no pid note of its own: the holder is unnamed.
    let error = SessionLog::open(&hard_link)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("session {} is in use by ", hard_link.display())),
        "{error}"
    );
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    // Once the holder is gone, any name opens it.
    SessionLog::open(&hard_link).unwrap();
}

/// Not a test on its own: the child process of the kill test. An agent keeping its conversation
/// in the session log answers turns until killed; each answer is large so that the kill usually
/// lands in the middle of a write.
#[tokio::test]
#[ignore = "run by an_agent_killed_mid_turn_loses_at_most_that_turn"]
async fn session_writer_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    // Words, not one long run: token counting a run of one character is needlessly slow.
    let filler = "x ".repeat(128 * 1024);
    // A window nothing fills: every request is checked before its call, and these grow
    // without compaction (big writes are what the kill should land in).
    let model = Arc::new(
        ScriptedModel::new("m", [])
            .with_fallback(format!("answer {filler}"))
            .with_context_window(1 << 40),
    );
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let settings = CompactionSettings {
        auto: false,
        ..CompactionSettings::default()
    };
    // Request-level commits: one commit per turn, so a turn is whole or absent (a request cut
    // with durable steps resumes instead: `chat_durable.rs`).
    let spec = AgentSpec::new("writer", model)
        .compaction(settings)
        .session(path)
        .request_commits_only();
    spawn_agent(&team, spec).await.unwrap();
    let done = team.checkpoint("writer").unwrap().conversation.len() / 2;
    for turn in done + 1.. {
        team.ask("writer", format!("turn {turn}")).await.unwrap();
    }
}

/// Whether the file now ends somewhere other than after a commit line.
fn mid_write(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let tail = b"{\"type\":\"commit\"}\n";
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut buf = vec![0; tail.len()];
    file.seek(SeekFrom::End(-(tail.len() as i64))).is_ok()
        && file.read_exact(&mut buf).is_ok()
        && buf != tail
}

fn commits(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.matches("{\"type\":\"commit\"}").count())
        .unwrap_or(0)
}

/// The user messages must be turn 1, 2, …, k, each followed by its answer.
fn complete_turns(path: &Path) -> usize {
    let session = load(path).unwrap();
    let messages = session.conversation.messages();
    assert_eq!(messages.len() % 2, 0, "a turn is never half restored");
    for (i, pair) in messages.chunks(2).enumerate() {
        assert_eq!(pair[0].text(), format!("turn {}", i + 1));
        assert!(pair[1].text().starts_with("answer x"));
    }
    messages.len() / 2
}

#[test]
fn an_agent_killed_mid_turn_loses_at_most_that_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.jsonl");
    for round in 0..3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "suite::session::session_writer_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let before = commits(&path);
        let started = Instant::now();
        // Let it commit a few turns, then kill it, preferably while a write is in progress.
        while commits(&path) < before + 4 {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the writer made no progress"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "the writer exited on its own"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let seen = commits(&path);
        let spin = Instant::now();
        while !mid_write(&path) && spin.elapsed() < Duration::from_secs(2) {}
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();

        // Every turn committed before the kill is there; the one being written may be lost.
        let turns = complete_turns(&path);
        // Usually the kill tore a line; either way the log must load.
        println!(
            "round {round}: {turns} turns, warnings: {:?}",
            load(&path).unwrap().warnings
        );
        // Two commits are not turns: the header and the first open's `model_change`.
        let non_turn_commits = 2;
        assert!(
            turns + non_turn_commits >= seen,
            "round {round}: {turns} turns restored, {seen} commits seen"
        );
        // The next writer resumes after the last complete turn (the next round checks it).
    }
    // A final open repairs the file; appending then gives a clean log.
    let (mut log, session) = SessionLog::open(&path).unwrap();
    let mut conversation = session.conversation;
    let id = conversation.push(ChatMessage::user("after the crash"));
    log.append_message(conversation.get(id).unwrap());
    log.flush().unwrap();
    let session = load(&path).unwrap();
    assert!(session.warnings.is_empty(), "{:?}", session.warnings);
    assert_eq!(
        session.conversation.last().unwrap().text(),
        "after the crash"
    );
}
