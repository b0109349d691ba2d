//! The built-in file tools: read_file, write_file, edit_file, list_dir, grep.

use serde_json::{Value, json};
use troupe_tools::builtin::{self, ReadFileOutput, sha256_hex};
use troupe_tools::{ToolFailure, ToolOutcome, ToolRegistry};

use super::support::{run, workspace};

fn tools() -> ToolRegistry {
    builtin::file_tools()
}

fn json_of(content: &str) -> Value {
    serde_json::from_str(content).unwrap()
}

#[tokio::test]
async fn read_file_returns_content_line_count_and_sha256() {
    let (dir, ctx) = workspace();
    let text = "one\ntwo\nthree\nfour\n";
    std::fs::write(dir.path().join("a.txt"), text).unwrap();
    let result = run(&tools(), &ctx, "read_file", json!({"path": "a.txt"})).await;
    assert_eq!(result.outcome, ToolOutcome::Success);
    let out: ReadFileOutput = serde_json::from_str(&result.content).unwrap();
    assert_eq!(out.path, "a.txt");
    assert_eq!(out.content, text);
    assert_eq!((out.start_line, out.end_line, out.line_count), (1, 4, 4));
    assert_eq!(out.sha256, sha256_hex(text.as_bytes()));
}

#[tokio::test]
async fn read_file_returns_a_line_range() {
    let (dir, ctx) = workspace();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    let result = run(
        &tools(),
        &ctx,
        "read_file",
        json!({"path": "a.txt", "start_line": 2, "end_line": 3}),
    )
    .await;
    let out: ReadFileOutput = serde_json::from_str(&result.content).unwrap();
    assert_eq!(out.content, "two\nthree\n");
    assert_eq!((out.start_line, out.end_line, out.line_count), (2, 3, 4));
    let result = run(
        &tools(),
        &ctx,
        "read_file",
        json!({"path": "a.txt", "start_line": 9}),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    assert_eq!(
        result.content,
        "start_line 9 is past the end of \"a.txt\", which has 4 lines"
    );
}

#[tokio::test]
async fn read_file_explains_missing_files_and_directories() {
    let (dir, ctx) = workspace();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let result = run(&tools(), &ctx, "read_file", json!({"path": "nope.rs"})).await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    assert!(
        result
            .content
            .starts_with("file \"nope.rs\" does not exist"),
        "{}",
        result.content
    );
    let result = run(&tools(), &ctx, "read_file", json!({"path": "src"})).await;
    assert!(
        result.content.contains("is a directory"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn write_file_creates_parents_and_reports_what_it_wrote() {
    let (dir, ctx) = workspace();
    let result = run(
        &tools(),
        &ctx,
        "write_file",
        json!({"path": "new/dir/b.txt", "content": "x\ny\n"}),
    )
    .await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    let out = json_of(&result.content);
    assert_eq!(out["path"], "new/dir/b.txt");
    assert_eq!(out["created"], true);
    assert_eq!(out["line_count"], 2);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("new/dir/b.txt")).unwrap(),
        "x\ny\n"
    );
    let again = run(
        &tools(),
        &ctx,
        "write_file",
        json!({"path": "new/dir/b.txt", "content": "z"}),
    )
    .await;
    assert_eq!(json_of(&again.content)["created"], false);
}

#[tokio::test]
async fn edit_file_replaces_a_unique_string_and_reports_the_lines() {
    let (dir, ctx) = workspace();
    let path = dir.path().join("lib.rs");
    std::fs::write(&path, "fn a() {}\nfn b() {}\nfn c() {}\n").unwrap();
    let result = run(
        &tools(),
        &ctx,
        "edit_file",
        json!({"path": "lib.rs", "old_string": "fn b() {}", "new_string": "fn b() {\n    1\n}"}),
    )
    .await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    let out = json_of(&result.content);
    assert_eq!(
        (
            out["replacements"].as_u64(),
            out["start_line"].as_u64(),
            out["end_line"].as_u64()
        ),
        (Some(1), Some(2), Some(4))
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "fn a() {}\nfn b() {\n    1\n}\nfn c() {}\n"
    );
}

#[tokio::test]
async fn edit_file_fails_clearly_when_the_string_is_absent() {
    let (dir, ctx) = workspace();
    std::fs::write(dir.path().join("lib.rs"), "fn a() {}\n").unwrap();
    let result = run(
        &tools(),
        &ctx,
        "edit_file",
        json!({"path": "lib.rs", "old_string": "fn  a()", "new_string": "fn z()"}),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    assert!(
        result
            .content
            .starts_with("old_string was not found in \"lib.rs\"; it must match the file exactly"),
        "{}",
        result.content
    );
    assert!(ctx.ledger.is_empty() || !ctx.ledger.snapshot().modified_files().contains("lib.rs"));
}

#[tokio::test]
async fn edit_file_fails_clearly_when_the_string_is_ambiguous() {
    let (dir, ctx) = workspace();
    let path = dir.path().join("lib.rs");
    std::fs::write(&path, "x = 1\ny = 2\nx = 1\nx = 1\n").unwrap();
    let args = json!({"path": "lib.rs", "old_string": "x = 1", "new_string": "x = 3"});
    let result = run(&tools(), &ctx, "edit_file", args).await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    assert!(
        result.content.starts_with(
            "old_string is ambiguous: it occurs 3 times in \"lib.rs\" (at lines 1, 3, 4)"
        ),
        "{}",
        result.content
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "x = 1\ny = 2\nx = 1\nx = 1\n"
    );
    let args = json!({
        "path": "lib.rs", "old_string": "x = 1", "new_string": "x = 3", "replace_all": true
    });
    let result = run(&tools(), &ctx, "edit_file", args).await;
    assert_eq!(json_of(&result.content)["replacements"], 3);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "x = 3\ny = 2\nx = 3\nx = 3\n"
    );
}

#[tokio::test]
async fn list_dir_lists_entries_relative_to_the_root() {
    let (dir, ctx) = workspace();
    std::fs::create_dir_all(dir.path().join("src/nested")).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.path().join("src/nested/x.rs"), "").unwrap();
    std::fs::write(dir.path().join("Cargo.toml"), "[package]\n").unwrap();
    let result = run(&tools(), &ctx, "list_dir", json!({})).await;
    assert_eq!(result.content, "Cargo.toml (10 bytes)\nsrc/");
    let result = run(
        &tools(),
        &ctx,
        "list_dir",
        json!({"path": "src", "recursive": true}),
    )
    .await;
    assert_eq!(
        result.content,
        "src/main.rs (13 bytes)\nsrc/nested/\nsrc/nested/x.rs (0 bytes)"
    );
    let result = run(&tools(), &ctx, "list_dir", json!({"path": "Cargo.toml"})).await;
    assert!(result.content.contains("is a file, not a directory"));
}

#[tokio::test]
async fn grep_finds_lines_and_bounds_its_output() {
    let (dir, ctx) = workspace();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::write(
        dir.path().join("src/a.rs"),
        "fn alpha() {}\nlet x = 1;\nfn beta() {}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".git/config"), "fn ignored\n").unwrap();
    std::fs::write(dir.path().join("bin.dat"), b"fn \0binary").unwrap();
    let result = run(&tools(), &ctx, "grep", json!({"pattern": "^fn \\w+"})).await;
    assert_eq!(
        result.content,
        "src/a.rs:1: fn alpha() {}\nsrc/a.rs:3: fn beta() {}"
    );
    let result = run(
        &tools(),
        &ctx,
        "grep",
        json!({"pattern": "fn", "max_matches": 1}),
    )
    .await;
    assert_eq!(
        result.content,
        "src/a.rs:1: fn alpha() {}\n[stopped after 1 matches; narrow the pattern or the path to \
         see the rest]"
    );
    let result = run(
        &tools(),
        &ctx,
        "grep",
        json!({"pattern": "ALPHA", "case_insensitive": true, "path": "src/a.rs"}),
    )
    .await;
    assert_eq!(result.content, "src/a.rs:1: fn alpha() {}");
    let result = run(&tools(), &ctx, "grep", json!({"pattern": "nothing here"})).await;
    assert!(
        result.content.starts_with("no matches for /nothing here/"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn grep_explains_an_invalid_regex() {
    let (_dir, ctx) = workspace();
    let result = run(&tools(), &ctx, "grep", json!({"pattern": "fn foo("})).await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    assert!(
        result
            .content
            .starts_with("invalid regular expression \"fn foo(\""),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn read_file_returns_a_long_file_in_parts_of_whole_lines() {
    let (dir, ctx) = workspace();
    let text: String = (1..=20_000).map(|n| format!("line {n:05}\n")).collect();
    std::fs::write(dir.path().join("big.txt"), &text).unwrap();
    let result = run(&tools(), &ctx, "read_file", json!({"path": "big.txt"})).await;
    assert_eq!(result.outcome, ToolOutcome::Success);
    let first: ReadFileOutput = serde_json::from_str(&result.content).unwrap();
    assert!(first.truncated);
    assert_eq!(first.line_count, 20_000);
    assert!(first.end_line < 20_000);
    assert!(
        first
            .content
            .ends_with(&format!("line {:05}\n", first.end_line))
    );
    let next_start = first.end_line + 1;
    let result = run(
        &tools(),
        &ctx,
        "read_file",
        json!({"path": "big.txt", "start_line": next_start}),
    )
    .await;
    let second: ReadFileOutput = serde_json::from_str(&result.content).unwrap();
    assert!(
        second
            .content
            .starts_with(&format!("line {next_start:05}\n"))
    );
}
