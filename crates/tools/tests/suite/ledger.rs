//! The file ledger records every built-in file operation, and custom tools can record too.

use serde_json::json;
use troupe_protocol::{FileAccess, FileLedger};
use troupe_tools::builtin::{self, sha256_hex};
use troupe_tools::{NoArgs, ToolContext, ToolError, ToolRegistry};

use super::support::{run, workspace};

#[tokio::test]
async fn the_ledger_distinguishes_read_only_from_modified_files() {
    let (dir, ctx) = workspace();
    std::fs::write(dir.path().join("read.txt"), "a\nb\nc\n").unwrap();
    std::fs::write(dir.path().join("edit.txt"), "old\n").unwrap();
    let tools = builtin::file_tools();
    run(
        &tools,
        &ctx,
        "read_file",
        json!({"path": "read.txt", "start_line": 2, "end_line": 3}),
    )
    .await;
    run(&tools, &ctx, "read_file", json!({"path": "edit.txt"})).await;
    run(
        &tools,
        &ctx,
        "edit_file",
        json!({"path": "edit.txt", "old_string": "old", "new_string": "new"}),
    )
    .await;
    run(
        &tools,
        &ctx,
        "write_file",
        json!({"path": "out/new.txt", "content": "x\n"}),
    )
    .await;
    run(&tools, &ctx, "list_dir", json!({})).await;
    run(&tools, &ctx, "grep", json!({"pattern": "a"})).await;

    let ledger = ctx.ledger.snapshot();
    assert_eq!(
        ledger.read_only_files().into_iter().collect::<Vec<_>>(),
        ["read.txt"]
    );
    assert_eq!(
        ledger.modified_files().into_iter().collect::<Vec<_>>(),
        ["edit.txt", "out/new.txt"]
    );

    let entries = ledger.entries();
    assert_eq!(entries.len(), 4, "list_dir and grep do not record");
    assert_eq!(entries[0].access, FileAccess::Read);
    assert_eq!(entries[0].lines, Some((2, 3)));
    assert_eq!(entries[0].line_count, Some(3));
    assert_eq!(
        entries[0].sha256.as_deref(),
        Some(sha256_hex(b"a\nb\nc\n").as_str())
    );
    assert_eq!(entries[0].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(entries[1].lines, None, "a whole-file read has no range");
    assert_eq!(entries[2].access, FileAccess::Edited);
    assert_eq!(entries[2].lines, Some((1, 1)));
    assert_eq!(
        entries[2].sha256.as_deref(),
        Some(sha256_hex(b"new\n").as_str())
    );
    assert_eq!(entries[3].access, FileAccess::Written);
    assert!(entries.iter().all(|e| e.at_ms > 0));
}

#[tokio::test]
async fn failed_operations_are_not_recorded() {
    let (_dir, ctx) = workspace();
    let tools = builtin::file_tools();
    run(&tools, &ctx, "read_file", json!({"path": "missing.txt"})).await;
    run(
        &tools,
        &ctx,
        "write_file",
        json!({"path": "../escape.txt", "content": ""}),
    )
    .await;
    assert!(ctx.ledger.is_empty());
}

#[tokio::test]
async fn custom_tools_can_record_into_the_ledger() {
    let (_dir, ctx) = workspace();
    let mut tools = ToolRegistry::new();
    tools
        .register_fn_with_context(
            "touch_db",
            "Pretend to migrate.",
            |ctx: ToolContext, _: NoArgs| async move {
                ctx.ledger.record(
                    ctx.ledger_entry("db/schema.sql", FileAccess::Edited)
                        .with_lines(3, 9),
                );
                Ok::<_, ToolError>("migrated")
            },
        )
        .unwrap();
    let result = run(&tools, &ctx, "touch_db", json!({})).await;
    assert_eq!(result.content, "migrated");
    let ledger = ctx.ledger.snapshot();
    assert_eq!(
        ledger.modified_files().into_iter().collect::<Vec<_>>(),
        ["db/schema.sql"]
    );
    assert_eq!(ledger.for_call("call_1").count(), 1);
}

#[test]
fn the_ledger_round_trips_through_json() {
    let shared = troupe_protocol::SharedLedger::new();
    shared.record(troupe_protocol::LedgerEntry::new("a.rs", FileAccess::Read).with_line_count(4));
    let json = serde_json::to_string(&shared.snapshot()).unwrap();
    let back: FileLedger = serde_json::from_str(&json).unwrap();
    assert_eq!(back, shared.snapshot());
    let restored = troupe_protocol::SharedLedger::from_ledger(back);
    assert_eq!(restored.len(), 1);
}
