//! Session logs: one writer at a time, strict loading (pairing, unique ids), a commit line that
//! lost only its newline, and paths that are not regular files.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use troupe_protocol::{ChatMessage, Conversation};
use troupe_session::{SessionLog, load};

fn log_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("log.jsonl")
}

/// Two committed turns of two messages each.
fn write_two_turns(path: &Path) -> Conversation {
    let (mut log, _) = SessionLog::open_for(path, Some("solo")).unwrap();
    let mut c = Conversation::new();
    for turn in 1..=2 {
        for m in [
            ChatMessage::user(format!("q{turn}")),
            ChatMessage::assistant(format!("a{turn}")),
        ] {
            let id = c.push(m);
            log.append_message(c.get(id).unwrap());
        }
        log.flush().unwrap();
    }
    c
}

fn texts(c: &Conversation) -> Vec<String> {
    c.messages().iter().map(|m| m.text()).collect()
}

#[test]
fn a_second_open_of_a_session_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let (first, _) = SessionLog::open(&path).unwrap();
    let error = SessionLog::open(&path).unwrap_err().to_string();
    let expected = format!("is in use by process {}", std::process::id());
    assert!(error.contains(&expected), "{error}");
    assert!(error.contains("log.jsonl"), "{error}");
    // The same file under another spelling of its path is the same session.
    let other_spelling = dir.path().join(".").join("log.jsonl");
    assert!(SessionLog::open(&other_spelling).is_err());
    // The holder's pid is in the sidecar lock file.
    let pid = std::fs::read_to_string(dir.path().join("log.jsonl.lock")).unwrap();
    assert_eq!(pid.trim(), std::process::id().to_string());
    drop(first);
    // Let go: the next opener gets it.
    let (_again, session) = SessionLog::open(&path).unwrap();
    assert!(session.warnings.is_empty(), "{:?}", session.warnings);
}

#[cfg(unix)]
#[test]
fn a_symbolic_or_hard_link_to_an_open_session_is_refused_as_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let symlink = dir.path().join("symlink.jsonl");
    let hard_link = dir.path().join("hard.jsonl");
    let refusal = |p: &Path| {
        format!(
            "session {} is in use by process {} (this process)",
            p.display(),
            std::process::id()
        )
    };
    for holder in [&path, &symlink, &hard_link] {
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&symlink);
        let _ = std::fs::remove_file(&hard_link);
        std::fs::write(&path, "").unwrap();
        std::os::unix::fs::symlink(&path, &symlink).unwrap();
        std::fs::hard_link(&path, &hard_link).unwrap();
        let (first, _) = SessionLog::open(holder).unwrap();
        for other in [&path, &symlink, &hard_link] {
            let error = SessionLog::open(other).map(|_| ()).unwrap_err();
            assert_eq!(error.to_string(), refusal(other), "held through {holder:?}");
        }
        drop(first);
        SessionLog::open(&hard_link).unwrap();
    }
}

#[cfg(unix)]
#[test]
fn a_new_log_and_its_lock_note_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new/log.jsonl");
    let (_log, _) = SessionLog::open(&path).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir.path().join("new/log.jsonl.lock")), 0o600);
    // An existing log keeps the mode its owner gave it.
    let shared = dir.path().join("shared.jsonl");
    std::fs::write(&shared, "").unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).unwrap();
    let (_log, _) = SessionLog::open(&shared).unwrap();
    assert_eq!(mode(&shared), 0o640);
}

#[test]
fn a_stale_pid_without_a_held_lock_is_not_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    write_two_turns(&path);
    // A killed holder leaves its pid behind; the kernel has dropped its lock.
    std::fs::write(dir.path().join("log.jsonl.lock"), "4194000\n").unwrap();
    let (_log, session) = SessionLog::open(&path).unwrap();
    assert_eq!(session.conversation.len(), 4);
    let pid = std::fs::read_to_string(dir.path().join("log.jsonl.lock")).unwrap();
    assert_eq!(pid.trim(), std::process::id().to_string());
}

/// Write `lines` (each a JSON record) as a log, check that loading and opening it both fail
/// naming `line`, and that the file is unchanged; returns the error.
fn refused(dir: &tempfile::TempDir, lines: &[&str], line: usize) -> String {
    let path = log_in(dir);
    let text = lines.join("\n") + "\n";
    std::fs::write(&path, &text).unwrap();
    let error = load(&path).unwrap_err().to_string();
    assert!(error.contains(&format!("log.jsonl:{line}:")), "{error}");
    let opened = SessionLog::open(&path).map(|_| ()).unwrap_err().to_string();
    assert_eq!(opened, error);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    error
}

const HEADER: &str = r#"{"type":"session","version":1,"created_ms":1}"#;
const COMMIT: &str = r#"{"type":"commit"}"#;
const USER_M1: &str =
    r#"{"type":"message","id":"m1","kind":"normal","message":{"role":"user","content":"hi"}}"#;
const CALLS_M2: &str = r#"{"type":"message","id":"m2","kind":"normal","message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"read_file","arguments":"{}"}}]}}"#;
const RESULT_C1_M3: &str = r#"{"type":"message","id":"m3","kind":"normal","message":{"role":"tool","tool_call_id":"c1","content":"one"}}"#;
const RESULT_C2_M4: &str = r#"{"type":"message","id":"m4","kind":"normal","message":{"role":"tool","tool_call_id":"c2","content":"two"}}"#;

#[test]
fn a_valid_tool_call_turn_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let lines = [
        HEADER,
        COMMIT,
        USER_M1,
        CALLS_M2,
        RESULT_C1_M3,
        RESULT_C2_M4,
        COMMIT,
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let session = load(&path).unwrap();
    assert_eq!(session.conversation.len(), 4);
}

#[test]
fn a_tool_result_answering_no_open_call_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let stray = r#"{"type":"message","id":"m3","kind":"normal","message":{"role":"tool","tool_call_id":"c9","content":"?"}}"#;
    let error = refused(&dir, &[HEADER, COMMIT, USER_M1, stray, COMMIT], 4);
    assert!(error.contains("c9"), "{error}");
}

#[test]
fn a_result_answered_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let again = RESULT_C1_M3.replace("\"m3\"", "\"m4\"");
    let lines = [HEADER, USER_M1, CALLS_M2, RESULT_C1_M3, &again, COMMIT];
    let error = refused(&dir, &lines, 5);
    assert!(error.contains("c1"), "{error}");
}

#[test]
fn a_call_without_a_result_is_refused_with_the_line_of_its_message() {
    let dir = tempfile::tempdir().unwrap();
    // c2 never gets its result, and the committed turn ends there.
    let lines = [HEADER, COMMIT, USER_M1, CALLS_M2, RESULT_C1_M3, COMMIT];
    let error = refused(&dir, &lines, 4);
    assert!(error.contains("c2"), "{error}");
    // Or the conversation goes on as if it had been answered.
    let next = r#"{"type":"message","id":"m4","kind":"normal","message":{"role":"user","content":"and?"}}"#;
    let lines = [
        HEADER,
        COMMIT,
        USER_M1,
        CALLS_M2,
        RESULT_C1_M3,
        next,
        COMMIT,
    ];
    let error = refused(&dir, &lines, 4);
    assert!(error.contains("c2"), "{error}");
}

#[test]
fn interleaved_writers_repeating_an_id_are_refused_with_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let second_writer = r#"{"type":"message","id":"m1","kind":"normal","message":{"role":"user","content":"hello"}}"#;
    let lines = [HEADER, COMMIT, USER_M1, COMMIT, second_writer, COMMIT];
    let error = refused(&dir, &lines, 5);
    assert!(error.contains("m1"), "{error}");
}

#[test]
fn a_commit_line_missing_only_its_newline_commits_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let written = write_two_turns(&path);
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.pop(), Some(b'\n'));
    std::fs::write(&path, &bytes).unwrap();

    let session = load(&path).unwrap();
    assert_eq!(session.conversation, written);
    assert!(session.warnings.is_empty(), "{:?}", session.warnings);

    // The next turn starts a line of its own.
    let (mut log, session) = SessionLog::open(&path).unwrap();
    assert_eq!(session.conversation, written);
    let mut c = session.conversation;
    let id = c.push(ChatMessage::user("q3"));
    log.append_message(c.get(id).unwrap());
    log.flush().unwrap();
    drop(log);
    let session = load(&path).unwrap();
    assert!(session.warnings.is_empty(), "{:?}", session.warnings);
    assert_eq!(texts(&session.conversation), ["q1", "a1", "q2", "a2", "q3"]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with("{\"type\":\"commit\"}\n"), "{text}");
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}

/// Run `f` on a thread; a call that blocks (a FIFO waiting for a writer) fails the test instead
/// of hanging it.
fn without_blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("blocked opening a session path that is not a regular file")
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_before_reading_and_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let path = fifo.clone();
    let error = without_blocking(move || load(&path).map(|_| ()).unwrap_err().to_string());
    assert!(error.contains("not a regular file"), "{error}");
    assert!(error.contains("FIFO"), "{error}");
    let error =
        without_blocking(move || SessionLog::open(&fifo).map(|_| ()).unwrap_err().to_string());
    assert!(error.contains("not a regular file"), "{error}");
}

#[cfg(unix)]
#[test]
fn a_device_is_refused_and_not_written() {
    let error = without_blocking(|| {
        SessionLog::open(Path::new("/dev/null"))
            .map(|_| ())
            .unwrap_err()
            .to_string()
    });
    assert!(
        error.contains("not a regular file (it is a device)"),
        "{error}"
    );
    let error = load(Path::new("/dev/zero")).unwrap_err().to_string();
    assert!(error.contains("device"), "{error}");
}

#[test]
fn a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions");
    std::fs::create_dir(&path).unwrap();
    let error = load(&path).unwrap_err().to_string();
    assert!(
        error.contains("not a regular file (it is a directory)"),
        "{error}"
    );
    let error = SessionLog::open(&path).map(|_| ()).unwrap_err().to_string();
    assert!(
        error.contains("not a regular file (it is a directory)"),
        "{error}"
    );
}

#[test]
fn a_new_log_creates_its_directories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/c/log.jsonl");
    write_two_turns(&path);
    assert_eq!(load(&path).unwrap().conversation.len(), 4);
}
