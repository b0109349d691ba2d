//! Sessions survive a writer killed with SIGKILL in the middle of a turn.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use troupe::ChatMessage;
use troupe::runtime::session::{SessionLog, load};

const CHILD_ENV: &str = "TROUPE_TEST_SESSION_CHILD";

/// Not a test on its own: the child process of the kill test. It writes turns until killed; each
/// turn's assistant message is large so that the kill usually lands in the middle of a write.
#[test]
#[ignore = "run by a_writer_killed_mid_turn_loses_at_most_that_turn"]
fn session_writer_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let (mut log, session) = SessionLog::open(Path::new(&path)).unwrap();
    let mut conversation = session.conversation;
    let filler = "x".repeat(1024 * 1024);
    for turn in conversation.len() / 2 + 1.. {
        for message in [
            ChatMessage::user(format!("turn {turn}")),
            ChatMessage::assistant(format!("answer {turn} {filler}")),
        ] {
            let id = conversation.push(message);
            log.append_message(conversation.get(id).unwrap());
        }
        log.flush().unwrap();
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
        assert!(pair[1].text().starts_with(&format!("answer {} x", i + 1)));
    }
    messages.len() / 2
}

#[test]
fn a_writer_killed_mid_turn_loses_at_most_that_turn() {
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
        let header_commits = 1;
        assert!(
            turns + header_commits >= seen,
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
