//! The `troupe` binary end to end: compact/expand on the corpus, replay, trace, help.

use std::process::Command;

use super::support::binary::{ok, s, troupe};
use super::support::{corpus_files, run_scripted_team, with_trace_file};

#[test]
fn compact_with_no_model_then_expand_gives_back_every_corpus_file_byte_for_byte() {
    let Some(files) = corpus_files() else { return };
    let dir = tempfile::tempdir().unwrap();
    for file in files {
        let name = file.file_stem().unwrap().to_str().unwrap();
        let small = dir.path().join(format!("{name}.small.json"));
        let archive = dir.path().join(format!("{name}.archive.jsonl"));
        let restored = dir.path().join(format!("{name}.restored.json"));
        let report = ok(&[
            "compact",
            s(&file),
            "--window",
            "8000",
            "--model",
            "none",
            "--out",
            s(&small),
            "--archive",
            s(&archive),
            "--json",
        ]);
        let report: serde_json::Value = serde_json::from_str(&report).unwrap();
        let r = &report["report"];
        assert!(
            r["tokens_after"].as_u64() <= r["tokens_before"].as_u64(),
            "{name}: {r}"
        );
        // Compacted output is a transcript in the input's format.
        troupe_cli::transcript_file::TranscriptFile::read(&small).unwrap();
        let out = ok(&[
            "expand",
            s(&small),
            "--archive",
            s(&archive),
            "--out",
            s(&restored),
        ]);
        assert!(out.contains("identical to the original"), "{name}: {out}");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            std::fs::read(&restored).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn compact_with_no_model_reaches_a_reachable_target_on_the_largest_transcript() {
    let Some(files) = corpus_files() else { return };
    let Some(file) = files.iter().find(|f| f.ends_with("pi-large-session.json")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.json");
    let report = ok(&[
        "compact",
        s(file),
        "--window",
        "32000",
        "--model",
        "none",
        "--out",
        s(&small),
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["report"]["reached"], true, "{report}");
    assert!(report["report"]["tokens_after"].as_u64().unwrap() <= 12_800);
    assert!(
        dir.path().join("small.archive.jsonl").is_file(),
        "the default archive path"
    );
}

#[test]
fn replay_compacts_at_the_trigger_and_keeps_invariants() {
    let Some(files) = corpus_files() else { return };
    let Some(file) = files.iter().find(|f| f.ends_with("pi-large-session.json")) else {
        return;
    };
    let out = ok(&[
        "replay",
        s(file),
        "--window",
        "32000",
        "--model",
        "none",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["invariants_ok"], true);
    let rows = report["compactions"].as_array().unwrap();
    assert!(!rows.is_empty());
    // At the trigger, less the room kept for each answer (4096 tokens).
    assert_eq!(report["output_reserve"], 4_096);
    assert!(report["max_prompt_tokens"].as_u64() <= Some(32_000 - 4_096));
    for row in rows {
        assert!(
            row["tokens_before"].as_u64() >= Some(25_600 - 4_096),
            "compacts at the trigger: {row}"
        );
        assert!(row["tokens_after"].as_u64() < row["tokens_before"].as_u64());
    }
    let text = ok(&["replay", s(file), "--window", "32000", "--model", "none"]);
    assert!(text.contains("invariants ok"), "{text}");
}

#[test]
fn trace_renders_a_team_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    with_trace_file(&path, false, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run_scripted_team())
    });
    let out = ok(&["trace", s(&path)]);
    assert!(out.contains("agent coordinator  (asked by user)"), "{out}");
    assert!(out.contains("agent namer  (asked by coordinator)"), "{out}");
}

/// `troupe trace run.jsonl | head -1`: the reader goes away early; the binary exits quietly
/// with status 0 instead of panicking on the broken pipe.
#[test]
fn a_closed_stdout_pipe_ends_the_program_quietly() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.jsonl");
    // Far more output than a pipe buffers (64 KiB on Linux), so the child is still writing
    // (blocked on the full pipe) when the reader closes its end.
    with_trace_file(&path, false, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for _ in 0..200 {
            rt.block_on(run_scripted_team());
        }
    });
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["trace", s(&path)])
        .env_remove("TROUPE_TRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("trace "), "{first}");
    // The reader (and the pipe's read end) is dropped here, like `head -1` exiting.
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(status.success(), "{status}: {stderr}");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"nope\": 1}").unwrap();
    let out = troupe(&[
        "compact",
        s(&bad),
        "--window",
        "1000",
        "--model",
        "none",
        "--out",
        s(&dir.path().join("o.json")),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not an OpenAI-format transcript"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn every_subcommand_has_help_with_examples() {
    for sub in ["compact", "expand", "replay", "trace", "chat"] {
        let out = ok(&[sub, "--help"]);
        assert!(out.contains("Examples:"), "{sub}: {out}");
    }
    assert!(ok(&["model", "pull", "--help"]).contains("Examples:"));
}

/// An error's cause is said once: an error type that puts its cause in its message does not also
/// hand it out as `source()`, where the binary's chain printer would repeat it.
#[test]
fn an_error_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.jsonl");
    let archive = dir.path().join("missing.archive.jsonl");
    let cases: Vec<Vec<&str>> = vec![
        vec![
            "expand",
            s(&missing),
            "--archive",
            s(&archive),
            "--out",
            "unused.json",
        ],
        vec!["trace", s(&missing)],
    ];
    for args in cases {
        let out = troupe(&args);
        assert!(!out.status.success(), "troupe {args:?} succeeded");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.matches("No such file or directory").count(),
            1,
            "troupe {args:?} should name the cause once:\n{stderr}"
        );
    }
}
