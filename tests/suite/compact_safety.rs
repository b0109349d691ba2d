//! `troupe compact` and `troupe expand` never lose or falsify data: outputs that alias the input
//! are refused, the archive is written before the output and both atomically, and `expand`
//! refuses a compacted file or an archive that does not restore the original messages exactly.

use serde_json::{Value, json};
use troupe_cli::transcript_file::TranscriptFile;

use super::support::binary::{fails, ok, s, stdout, troupe};
use super::support::compact::{Fixture, compact_args, transcript};

#[test]
fn compact_out_on_the_input_with_an_unwritable_archive_keeps_the_input() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let before = std::fs::read(&input).unwrap();
    let missing = f.path("missing/dir/a.jsonl");
    fails(&compact_args(&input, &input, &missing));
    assert!(
        std::fs::read(&input).unwrap() == before,
        "the input was replaced"
    );
}

#[test]
fn compact_writes_the_archive_before_the_output() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let out = f.path("small.json");
    let err = fails(&compact_args(&input, &out, &f.path("missing/a.jsonl")));
    assert!(err.contains("missing"), "{err}");
    assert!(
        !out.exists(),
        "an output without its archive cannot be expanded"
    );
    assert_eq!(f.names(), ["in.json"], "no temp file is left behind");
}

#[test]
fn compact_refuses_outputs_that_alias_the_input_or_each_other() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let before = std::fs::read(&input).unwrap();
    let archive = f.path("a.jsonl");
    let out = f.path("small.json");

    // --out is the input, by the same or another spelling.
    let err = fails(&compact_args(&input, &input, &archive));
    assert!(err.contains("same file"), "{err}");
    let dotted = f.dir.path().join(".").join("in.json");
    fails(&compact_args(&input, &dotted, &archive));
    // --archive is the input.
    fails(&compact_args(&input, &out, &input));
    // A hard link and a symbolic link to the input.
    let hard = f.path("hard.json");
    std::fs::hard_link(&input, &hard).unwrap();
    let err = fails(&compact_args(&input, &hard, &archive));
    assert!(err.contains("same file"), "{err}");
    let soft = f.path("soft.json");
    std::os::unix::fs::symlink(&input, &soft).unwrap();
    fails(&compact_args(&input, &out, &soft));
    // --out and --archive are one (not yet existing) file.
    let err = fails(&compact_args(
        &input,
        &out,
        &f.dir.path().join(".").join("small.json"),
    ));
    assert!(err.contains("same file"), "{err}");
    // --out given, --archive defaulted: an input named like the default archive.
    let archive_named = f.path("x.archive.jsonl");
    std::fs::copy(&input, &archive_named).unwrap();
    let err = fails(&[
        "compact",
        s(&archive_named),
        "--window",
        "8000",
        "--model",
        "none",
        "--out",
        s(&f.path("x.json")),
    ]);
    assert!(err.contains("same file"), "{err}");

    assert!(
        std::fs::read(&input).unwrap() == before,
        "the input changed"
    );
    assert!(std::fs::read(&archive_named).unwrap() == before);
    assert!(!out.exists() && !archive.exists(), "nothing is written");
    assert_eq!(
        f.names(),
        ["hard.json", "in.json", "soft.json", "x.archive.jsonl"]
    );
}

#[test]
fn compact_out_through_a_symlink_writes_the_link_target() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let target = f.path("target.json");
    std::fs::write(&target, "old").unwrap();
    let link = f.path("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    f.compact(&input, &link, &f.path("a.jsonl"));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link stays a link"
    );
    TranscriptFile::read(&target).unwrap();
}

#[test]
fn expand_refuses_an_archive_of_another_transcript() {
    let f = Fixture::new();
    let (a, b) = (f.input("a.json", "a"), f.input("b.json", "b"));
    let (a_small, a_archive) = (f.path("a.small.json"), f.path("a.archive.jsonl"));
    let (b_small, b_archive) = (f.path("b.small.json"), f.path("b.archive.jsonl"));
    f.compact(&a, &a_small, &a_archive);
    f.compact(&b, &b_small, &b_archive);
    let restored = f.path("restored.json");
    let err = fails(&[
        "expand",
        s(&a_small),
        "--archive",
        s(&b_archive),
        "--out",
        s(&restored),
    ]);
    assert!(err.contains("sha256"), "{err}");
    assert!(!restored.exists(), "nothing is written");
}

/// Expands `small` with `archive` after `edit` changed the archive's text; expects a refusal.
#[track_caller]
fn assert_edited_archive_is_refused(what: &str, edit: impl FnOnce(&str) -> String) {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let (small, archive) = (f.path("small.json"), f.path("a.jsonl"));
    f.compact(&input, &small, &archive);
    let text = std::fs::read_to_string(&archive).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "{what}: the edit changed nothing");
    std::fs::write(&archive, edited).unwrap();
    let restored = f.path("restored.json");
    let out = troupe(&[
        "expand",
        s(&small),
        "--archive",
        s(&archive),
        "--out",
        s(&restored),
    ]);
    assert!(
        !out.status.success(),
        "{what}: expand accepted it:\n{}",
        stdout(&out)
    );
    assert!(!restored.exists(), "{what}: nothing is written");
}

#[test]
fn expand_refuses_an_archive_with_a_changed_byte_role_or_a_deleted_line() {
    assert_edited_archive_is_refused("a changed byte", |t| {
        t.replacen("let x = 0 * 0", "let x = 9 * 0", 1)
    });
    assert_edited_archive_is_refused("a changed role", |t| {
        t.replacen(r#""role":"tool""#, r#""role":"user""#, 1)
    });
    assert_edited_archive_is_refused("a deleted line", |t| {
        let mut lines: Vec<&str> = t.lines().collect();
        lines.remove(2);
        lines.join("\n") + "\n"
    });
}

#[test]
fn expand_refuses_a_compacted_file_whose_messages_changed() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let (small, archive) = (f.path("small.json"), f.path("a.jsonl"));
    f.compact(&input, &small, &archive);
    let text = std::fs::read_to_string(&small).unwrap();
    std::fs::write(&small, text.replacen("Step 0", "Step 7", 1)).unwrap();
    let restored = f.path("restored.json");
    let err = fails(&[
        "expand",
        s(&small),
        "--archive",
        s(&archive),
        "--out",
        s(&restored),
    ]);
    assert!(err.contains("sha256"), "{err}");
    assert!(!restored.exists());
}

#[test]
fn expand_of_a_reformatted_compacted_file_restores_the_messages_and_says_the_layout_differs() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let (small, archive) = (f.path("small.json"), f.path("a.jsonl"));
    f.compact(&input, &small, &archive);
    // Same messages, other whitespace and an extra envelope field.
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(&small).unwrap()).unwrap();
    value["source"] = json!("reformatted");
    std::fs::write(&small, serde_json::to_string(&value).unwrap()).unwrap();
    let restored = f.path("restored.json");
    let out = f.expand(&small, &archive, &restored);
    assert!(out.contains("messages identical"), "{out}");
    assert!(out.contains("layout"), "{out}");
    let original = TranscriptFile::read(&input).unwrap();
    let back = TranscriptFile::read(&restored).unwrap();
    assert_eq!(back.messages, original.messages);
}

#[test]
fn expand_of_an_original_in_another_key_order_restores_the_messages_and_says_the_layout_differs() {
    let f = Fixture::new();
    // Keys sorted (`content` before `role`): troupe writes `role` first, so the file cannot come
    // back byte for byte, but every message does.
    let input = f.path("in.json");
    let value: Value = serde_json::from_str(&transcript(8, "a")).unwrap();
    std::fs::write(&input, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let (small, archive) = (f.path("small.json"), f.path("a.jsonl"));
    f.compact(&input, &small, &archive);
    let restored = f.path("restored.json");
    let out = f.expand(&small, &archive, &restored);
    assert!(out.contains("messages identical"), "{out}");
    assert!(!out.contains("identical to the original (sha256"), "{out}");
    let original = TranscriptFile::read(&input).unwrap();
    let back = TranscriptFile::read(&restored).unwrap();
    assert_eq!(back.messages, original.messages);
}

#[test]
fn expand_refuses_to_overwrite_its_inputs() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let (small, archive) = (f.path("small.json"), f.path("a.jsonl"));
    f.compact(&input, &small, &archive);
    let (small_before, archive_before) = (
        std::fs::read(&small).unwrap(),
        std::fs::read(&archive).unwrap(),
    );
    for out in [&small, &archive] {
        let err = fails(&[
            "expand",
            s(&small),
            "--archive",
            s(&archive),
            "--out",
            s(out),
        ]);
        assert!(err.contains("same file"), "{err}");
    }
    assert!(std::fs::read(&small).unwrap() == small_before);
    assert!(std::fs::read(&archive).unwrap() == archive_before);
}

#[test]
fn expand_reads_a_version_1_archive_and_still_checks_it() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let (small, archive) = (f.path("small.json"), f.path("a.jsonl"));
    f.compact(&input, &small, &archive);
    // A version 1 header: the file checksums only.
    let text = std::fs::read_to_string(&archive).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let header: Value = serde_json::from_str(first).unwrap();
    let v1 = json!({
        "format": header["format"],
        "version": 1,
        "ids": header["ids"],
        "compacted_sha256": header["compacted_sha256"],
        "original_sha256": header["original_sha256"],
    });
    std::fs::write(&archive, format!("{v1}\n{rest}")).unwrap();
    let restored = f.path("restored.json");
    let out = f.expand(&small, &archive, &restored);
    assert!(out.contains("identical to the original"), "{out}");
    assert!(std::fs::read(&input).unwrap() == std::fs::read(&restored).unwrap());
    // A damaged version 1 archive is refused too.
    std::fs::remove_file(&restored).unwrap();
    std::fs::write(
        &archive,
        format!("{v1}\n{rest}").replacen("let x = 0 * 0", "let x = 9 * 0", 1),
    )
    .unwrap();
    fails(&[
        "expand",
        s(&small),
        "--archive",
        s(&archive),
        "--out",
        s(&restored),
    ]);
    assert!(!restored.exists());
}

#[test]
fn compact_refuses_a_window_too_small_to_use() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let out = f.path("small.json");
    for window in ["1", "100"] {
        let err = fails(&[
            "compact",
            s(&input),
            "--window",
            window,
            "--model",
            "none",
            "--out",
            s(&out),
        ]);
        assert!(err.contains(&format!("window ({window} tokens)")), "{err}");
        assert!(err.contains("1024"), "{err}");
        assert!(!out.exists(), "nothing is written");
    }
}

#[test]
fn compact_refuses_a_window_that_cannot_hold_the_protected_messages() {
    let f = Fixture::new();
    // The last user message alone is about 3000 tokens: protected, it can never fit 2000.
    let big = "word ".repeat(3000);
    let text = json!({"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": big},
        {"role": "assistant", "content": "ok"},
    ]})
    .to_string();
    let input = f.path("in.json");
    std::fs::write(&input, text).unwrap();
    let out = f.path("small.json");
    let err = fails(&[
        "compact",
        s(&input),
        "--window",
        "2000",
        "--model",
        "none",
        "--out",
        s(&out),
    ]);
    assert!(err.contains("does not fit"), "{err}");
    assert!(err.contains("protected"), "{err}");
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn compact_accepts_any_target_below_one_and_names_the_target_it_refuses() {
    let f = Fixture::new();
    let input = f.input("in.json", "a");
    let out = f.path("small.json");
    let report = ok(&[
        "compact",
        s(&input),
        "--window",
        "8000",
        "--target",
        "0.99",
        "--model",
        "none",
        "--out",
        s(&out),
        "--json",
    ]);
    let report: Value = serde_json::from_str(&report).unwrap();
    let target_tokens = report["report"]["target_tokens"].as_u64().unwrap();
    assert!((7919..=7920).contains(&target_tokens), "{report}");
    for target in ["1", "0", "1.5", "-0.2", "NaN"] {
        let err = fails(&[
            "compact",
            s(&input),
            "--window",
            "8000",
            &format!("--target={target}"),
            "--model",
            "none",
            "--out",
            s(&f.path("other.json")),
        ]);
        assert!(err.contains("target"), "{target}: {err}");
        assert!(!err.contains("trigger"), "{target}: {err}");
    }
}

#[test]
fn compact_and_expand_keep_every_top_level_key_in_its_place() {
    let f = Fixture::new();
    // `tools` and `model` before the messages, `meta` after them, values exactly as written
    // (number text, nested key order), in troupe's layout so the file can come back byte for
    // byte.
    let plain = transcript(8, "a");
    let body = plain
        .strip_prefix("{\n  \"messages\": ")
        .and_then(|rest| rest.strip_suffix("\n}"))
        .unwrap();
    let before = concat!(
        "{\n",
        "  \"tools\": [\n",
        "    {\n",
        "      \"type\": \"function\",\n",
        "      \"name\": \"read_file\"\n",
        "    }\n",
        "  ],\n",
        "  \"model\": \"gpt-4o\",\n",
    );
    let after = concat!(
        ",\n",
        "  \"meta\": {\n",
        "    \"z\": 1.50,\n",
        "    \"a\": 123456789012345678901234567890\n",
        "  }\n",
        "}\n",
    );
    let text = format!("{before}  \"messages\": {body}{after}");
    let input = f.path("in.json");
    std::fs::write(&input, &text).unwrap();
    let (small, archive) = (f.path("small.json"), f.path("a.jsonl"));
    f.compact(&input, &small, &archive);
    let compacted = std::fs::read_to_string(&small).unwrap();
    assert!(compacted.starts_with(before), "{compacted}");
    assert!(compacted.ends_with(after), "{compacted}");
    assert!(compacted.len() < text.len(), "nothing was compacted");
    let restored = f.path("restored.json");
    let out = f.expand(&small, &archive, &restored);
    assert!(out.contains("identical to the original (sha256"), "{out}");
    assert_eq!(std::fs::read_to_string(&restored).unwrap(), text);
}
