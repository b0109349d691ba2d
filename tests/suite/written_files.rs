//! Every file troupe writes beside a path a user named (#52), through the real binary: a
//! sidecar or output is never written through a symbolic link planted where troupe's own file
//! goes, nothing troupe writes waits on a FIFO, and what holds conversation content is private.

use std::path::Path;

use super::support::binary::{s, stderr, stdout, troupe};

/// A session log of two steps (its header, one user message), as `troupe chat` writes one.
fn write_log(path: &Path) {
    std::fs::write(
        path,
        concat!(
            r#"{"type":"session","version":2,"agent":"a","created_ms":1}"#,
            "\n",
            r#"{"type":"commit"}"#,
            "\n",
            r#"{"type":"message","id":"m1","kind":"normal","message":{"role":"user","content":"hi"}}"#,
            "\n",
            r#"{"type":"commit"}"#,
            "\n",
        ),
    )
    .unwrap();
}

#[cfg(unix)]
#[test]
fn a_fork_never_writes_through_a_lock_note_that_is_a_symbolic_link() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("s.jsonl");
    write_log(&log);
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    // The original's note, then the new log's note, each a link to someone else's file.
    let out = dir.path().join("fork.jsonl");
    for note in [
        dir.path().join("s.jsonl.lock"),
        dir.path().join("fork.jsonl.lock"),
    ] {
        std::os::unix::fs::symlink(&victim, &note).unwrap();
        let run = troupe(&["session", "fork", s(&log), "--at", "1", "--out", s(&out)]);
        assert!(!run.status.success(), "{}", stdout(&run));
        let said = stderr(&run);
        assert!(
            said.contains(&format!("{} is a symbolic link", note.display())),
            "{said}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(std::fs::symlink_metadata(&note).unwrap().is_symlink());
        std::fs::remove_file(&note).unwrap();
        let _ = std::fs::remove_file(&out);
    }
    // A link at the new log's path, even one to nothing yet, is not a new log.
    let elsewhere = dir.path().join("elsewhere.jsonl");
    std::os::unix::fs::symlink(&elsewhere, &out).unwrap();
    let run = troupe(&["session", "fork", s(&log), "--at", "1", "--out", s(&out)]);
    assert!(!run.status.success(), "{}", stdout(&run));
    assert!(stderr(&run).contains("exists already"), "{}", stderr(&run));
    assert!(!elsewhere.exists());
    std::fs::remove_file(&out).unwrap();
    // Without the links the fork is written, and its note is private.
    let run = troupe(&["session", "fork", s(&log), "--at", "1", "--out", s(&out)]);
    assert!(run.status.success(), "{}", stderr(&run));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), 0o600);
    assert_eq!(mode(&dir.path().join("fork.jsonl.lock")), 0o600);
}

/// The output of `command` once it ends, failing the test (`what` hung) past a deadline
/// generous for a loaded machine: a command that waits on a FIFO never ends on its own.
#[cfg(unix)]
fn ended_within(mut command: std::process::Command, secs: u64, what: &str) -> std::process::Output {
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Runs `troupe ARGS` with `TROUPE_TRACE=trace`.
#[cfg(unix)]
fn traced_within_a_minute(trace: &Path, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_troupe"));
    command.args(args).env("TROUPE_TRACE", trace);
    let what = format!("troupe {args:?} with TROUPE_TRACE={}", trace.display());
    ended_within(command, 60, &what)
}

#[cfg(unix)]
#[test]
fn a_trace_file_that_is_a_fifo_without_a_reader_is_refused_at_once_and_the_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("s.jsonl");
    write_log(&log);
    let fifo = dir.path().join("trace.fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let run = traced_within_a_minute(&fifo, &["session", "show", s(&log)]);
    assert!(run.status.success(), "{}", stderr(&run));
    let said = stderr(&run);
    assert!(
        said.contains("telemetry is off") && said.contains("a FIFO with no reader"),
        "{said}"
    );
    assert!(stdout(&run).contains("request"), "{}", stdout(&run));
}

#[cfg(unix)]
#[test]
fn a_trace_file_a_killed_run_left_torn_gets_the_next_run_on_a_line_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("run.jsonl");
    std::fs::write(&trace, r#"{"type":"span","name":"torn by a kill"#).unwrap();
    let missing = dir.path().join("missing.json");
    let out = dir.path().join("out.json");
    let run = traced_within_a_minute(
        &trace,
        &[
            "expand",
            s(&missing),
            "--archive",
            s(&missing),
            "--out",
            s(&out),
        ],
    );
    assert!(!run.status.success(), "expand of a missing file ran");
    let read = troupe::protocol::trace::read_trace_file(&trace).unwrap();
    assert_eq!(read.bad_lines, 1, "{:?}", read.warnings(&trace));
    let names: Vec<&str> = read
        .lines
        .iter()
        .filter_map(|line| match line {
            troupe::protocol::trace::TraceLine::Span(span) => Some(span.name.as_str()),
            troupe::protocol::trace::TraceLine::Event(_) => None,
        })
        .collect();
    assert_eq!(names, ["expand_transcript"]);
}

/// `TROUPE_CASSETTES=record:DIR` on the team example, a `Team::builder()` program, run through
/// its binary.
#[cfg(unix)]
fn record_team_into(dir: &Path) -> std::process::Output {
    let mut command = std::process::Command::new(super::support::binary::example("team"));
    command
        .arg("--scripted")
        .env("TROUPE_CASSETTES", format!("record:{}", dir.display()))
        .env_remove("TROUPE_TRACE");
    ended_within(
        command,
        120,
        &format!("recording the team into {}", dir.display()),
    )
}

#[cfg(unix)]
#[test]
fn a_cassette_is_private_one_recorders_and_never_written_through_a_link_or_a_fifo() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let cassettes = dir.path().join("cassettes");
    std::fs::create_dir(&cassettes).unwrap();
    let coordinator = cassettes.join("coordinator.jsonl");

    // A link planted where troupe's own cassette goes.
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, &coordinator).unwrap();
    let run = record_team_into(&cassettes);
    assert!(!run.status.success(), "{}", stdout(&run));
    let said = stderr(&run);
    assert!(
        said.contains("coordinator.jsonl") && said.contains("a symbolic link"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    std::fs::remove_file(&coordinator).unwrap();

    // A FIFO there is refused at once, not waited on.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &coordinator,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let run = record_team_into(&cassettes);
    assert!(!run.status.success(), "{}", stdout(&run));
    assert!(
        stderr(&run).contains("coordinator.jsonl"),
        "{}",
        stderr(&run)
    );
    std::fs::remove_file(&coordinator).unwrap();

    // Another recorder holding the cassette keeps this one out; its file is left alone.
    std::fs::write(&coordinator, "another run's recording\n").unwrap();
    let held = std::fs::File::open(&coordinator).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let run = record_team_into(&cassettes);
    assert!(!run.status.success(), "{}", stdout(&run));
    assert!(
        stderr(&run).contains("another recorder"),
        "{}",
        stderr(&run)
    );
    assert_eq!(
        std::fs::read_to_string(&coordinator).unwrap(),
        "another run's recording\n"
    );
    drop(held);

    // Alone, it records, and every cassette is private (they hold every prompt and answer).
    std::fs::set_permissions(&coordinator, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = record_team_into(&cassettes);
    assert!(run.status.success(), "{}", stderr(&run));
    let mut recorded = 0;
    for entry in std::fs::read_dir(&cassettes).unwrap() {
        let path = entry.unwrap().path();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
        recorded += 1;
    }
    assert!(recorded >= 3, "{recorded} cassettes");
}
