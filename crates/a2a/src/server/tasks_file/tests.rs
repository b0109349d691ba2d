//! The tasks file's rules, on real files: what a torn or bad line costs, the bound, the
//! rewrite through a private temporary file, one writer, no FIFO and no link.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt as _;

use serde_json::json;

use super::{TaskLine, TasksFile, read_lines};
use crate::error::ServeError;

fn line(id: &str) -> String {
    let task = json!({"id": id, "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}});
    TaskLine {
        agent: "coder".into(),
        caller: Some("tester".into()),
        task: serde_json::from_value(task).unwrap(),
    }
    .text()
}

#[test]
fn a_torn_tail_or_a_bad_line_is_skipped_and_nothing_else() {
    let mut bytes = format!("{}\nnot json\n", line("a")).into_bytes();
    bytes.extend_from_slice(b"\xff\xfe\n");
    bytes.extend_from_slice(format!("{}\n", line("b")).as_bytes());
    // Cut inside "é" (0xc3 0xa9): the last line has half a character and no newline.
    bytes.extend_from_slice(b"{\"agent\": \"caf\xc3");
    let (lines, warnings) = read_lines(&bytes);
    let ids: Vec<_> = lines.iter().map(|(l, _)| l.task.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(lines[0].1, line("a").len() as u64 + 1);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[1].contains("not UTF-8"), "{warnings:?}");
    assert!(warnings[2].contains("incomplete last line"), "{warnings:?}");
}

#[test]
fn the_rewrite_is_private_atomic_and_leaves_other_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.jsonl");
    let unrelated = dir.path().join("tasks.tmp");
    std::fs::write(&unrelated, "mine").unwrap();
    std::fs::write(&path, format!("{}\n", line("old"))).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (mut file, restored) = TasksFile::open(&path).unwrap();
    assert_eq!(restored.len(), 1);
    let (a, b) = (line("a"), line("b"));
    file.rewrite([a.as_str()]);
    file.record(&b);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("{a}\n{b}\n")
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(std::fs::read_to_string(&unrelated).unwrap(), "mine");
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn the_file_is_outgrown_past_an_eighth_of_what_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (mut file, _) = TasksFile::open(&dir.path().join("tasks.jsonl")).unwrap();
    let one = line("x");
    for _ in 0..(1000 + 125 + 16) {
        file.record(&one);
    }
    let per = one.len() as u64 + 1;
    assert!(!file.outgrown(1000, 1000 * per));
    file.record(&one);
    assert!(file.outgrown(1000, 1000 * per));
    let big = "y".repeat(1 << 20);
    for _ in 0..10 {
        file.record(&big);
    }
    assert!(file.outgrown(100_000, 8 << 20), "10 MiB beside 8 MiB kept");
}

#[test]
fn one_writer_per_file_and_no_fifo_or_link() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.jsonl");
    let (first, _) = TasksFile::open(&path).unwrap();
    match TasksFile::open(&path) {
        Err(ServeError::TasksFileInUse { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("{:?}", other.map(|_| ())),
    }
    drop(first);
    assert!(
        TasksFile::open(&path).is_ok(),
        "the lock went with its holder"
    );
    let fifo = dir.path().join("fifo.jsonl");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let error = TasksFile::open(&fifo).map(|_| ()).unwrap_err().to_string();
    assert!(error.contains("a FIFO"), "{error}");
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let error = TasksFile::open(&link).map(|_| ()).unwrap_err().to_string();
    assert!(error.contains("symbolic link"), "{error}");
}
