//! Every bad-input case becomes a clear tool result with the right failure class, never a crash.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_protocol::Event;
use troupe_tools::{NoArgs, ToolError, ToolFailure, ToolOutcome, ToolRegistry};

use super::support::{Recorded, call, run, workspace};

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Edit {
    old: String,
    new: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct PatchArgs {
    /// File to patch.
    path: String,
    /// How many times.
    count: u32,
    /// The edits.
    #[serde(default)]
    edits: Vec<Edit>,
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry
        .register_fn("patch", "Patch a file.", |args: PatchArgs| async move {
            Ok::<_, ToolError>(format!("{} x{}", args.path, args.count))
        })
        .unwrap()
        .register_fn("boom", "Panics.", |_: NoArgs| async move {
            if true {
                panic!("index out of range: 7");
            }
            Ok::<_, ToolError>("unreachable")
        })
        .unwrap()
        .register_fn("hang", "Never finishes.", |_: NoArgs| async move {
            futures::future::pending::<()>().await;
            Ok::<_, ToolError>("unreachable")
        })
        .unwrap()
        .register_fn("flood", "Huge output.", |_: NoArgs| async move {
            Ok::<_, ToolError>(format!("BEGIN{}END", "x".repeat(10_000)))
        })
        .unwrap()
        .register_fn("refuse", "Refuses.", |_: NoArgs| async move {
            Err::<String, _>(ToolError::respond("the file is locked; try again later"))
        })
        .unwrap()
        .register_fn("die", "Fails fatally.", |_: NoArgs| async move {
            Err::<String, _>(ToolError::fatal("credentials revoked"))
        })
        .unwrap();
    registry
}

#[tokio::test]
async fn malformed_json_arguments() {
    let (_dir, ctx) = workspace();
    let result = registry()
        .dispatch(&call("patch", r#"{"path": "a.rs", "count": "#), &ctx)
        .await;
    assert_eq!(
        result.outcome,
        ToolOutcome::Error(ToolFailure::MalformedArguments)
    );
    assert!(
        result
            .content
            .starts_with("malformed JSON arguments for patch: "),
        "{}",
        result.content
    );
    assert!(
        result.content.contains("path (string, required)"),
        "{}",
        result.content
    );
    assert!(!result.is_fatal());
}

#[tokio::test]
async fn a_missing_field_is_named() {
    let (_dir, ctx) = workspace();
    let result = run(&registry(), &ctx, "patch", json!({"count": 1})).await;
    assert_eq!(
        result.outcome,
        ToolOutcome::Error(ToolFailure::InvalidArguments {
            field: Some("path".into())
        })
    );
    assert!(
        result
            .content
            .starts_with("invalid arguments for patch: missing field \"path\"; "),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn a_field_of_the_wrong_type_is_named() {
    let (_dir, ctx) = workspace();
    let result = run(
        &registry(),
        &ctx,
        "patch",
        json!({"path": "a.rs", "count": "three"}),
    )
    .await;
    assert_eq!(
        result.outcome,
        ToolOutcome::Error(ToolFailure::InvalidArguments {
            field: Some("count".into())
        })
    );
    assert!(
        result.content.starts_with(
            "invalid arguments for patch: field \"count\": expected integer, got string \"three\""
        ),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn a_nested_field_is_named_by_its_path() {
    let (_dir, ctx) = workspace();
    let args =
        json!({"path": "a.rs", "count": 1, "edits": [{"old": "a", "new": "b"}, {"old": "c"}]});
    let result = run(&registry(), &ctx, "patch", args).await;
    assert_eq!(
        result.failure(),
        Some(&ToolFailure::InvalidArguments {
            field: Some("edits[1].new".into())
        })
    );
    assert!(
        result.content.contains("missing field \"edits[1].new\""),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn arguments_that_are_not_an_object() {
    let (_dir, ctx) = workspace();
    let result = registry().dispatch(&call("patch", "[1, 2]"), &ctx).await;
    assert_eq!(
        result.failure(),
        Some(&ToolFailure::InvalidArguments { field: None })
    );
    assert!(
        result
            .content
            .contains("expected a JSON object of named parameters, got an array")
    );
}

#[tokio::test]
async fn lenient_readings_small_models_need() {
    let (_dir, ctx) = workspace();
    let registry = registry();
    // Empty arguments for a tool without parameters.
    let result = registry.dispatch(&call("refuse", ""), &ctx).await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    // Arguments JSON-encoded twice.
    let twice = serde_json::to_string(&json!({"path": "a.rs", "count": 2}).to_string()).unwrap();
    let result = registry.dispatch(&call("patch", &twice), &ctx).await;
    assert_eq!(result.content, "a.rs x2");
}

#[tokio::test]
async fn an_unknown_tool_lists_the_available_ones() {
    let (_dir, ctx) = workspace();
    let registry = troupe_tools::builtin::file_tools();
    let result = run(&registry, &ctx, "reed_file", json!({"path": "a"})).await;
    assert_eq!(result.outcome, ToolOutcome::Error(ToolFailure::UnknownTool));
    assert_eq!(
        result.content,
        "unknown tool \"reed_file\"; did you mean \"read_file\"? available tools: read_file, \
         write_file, edit_file, list_dir, grep"
    );
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result() {
    let (_dir, ctx) = workspace();
    let result = run(&registry(), &ctx, "boom", json!({})).await;
    assert_eq!(result.outcome, ToolOutcome::Error(ToolFailure::Panicked));
    assert!(
        result
            .content
            .starts_with("boom crashed (panic: index out of range: 7)"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn a_tool_past_its_timeout_is_stopped() {
    let (_dir, ctx) = workspace();
    let mut registry = registry();
    // The tool never finishes, so the outcome does not depend on timing.
    registry
        .set_timeout("hang", Duration::from_millis(20))
        .unwrap();
    let result = run(&registry, &ctx, "hang", json!({})).await;
    assert_eq!(result.outcome, ToolOutcome::Error(ToolFailure::TimedOut));
    assert_eq!(
        result.content,
        "hang did not finish within 20 ms and was stopped; try a smaller or simpler request"
    );
}

#[tokio::test]
async fn the_default_timeout_applies_to_every_tool_without_one() {
    let mut registry = registry();
    assert_eq!(registry.timeout_of("hang"), Some(Duration::from_secs(60)));
    registry.set_default_timeout(Duration::from_millis(10));
    let (_dir, ctx) = workspace();
    let result = run(&registry, &ctx, "hang", json!({})).await;
    assert_eq!(result.outcome, ToolOutcome::Error(ToolFailure::TimedOut));
}

#[tokio::test]
async fn oversized_output_is_truncated_with_a_marker_stating_the_original_size() {
    let (_dir, ctx) = workspace();
    let mut registry = registry();
    registry.set_output_cap(300);
    let result = run(&registry, &ctx, "flood", json!({})).await;
    assert_eq!(
        result.outcome,
        ToolOutcome::Success,
        "truncation is not a failure"
    );
    assert!(result.content.starts_with("BEGIN"));
    assert!(result.content.ends_with("END"), "the tail is kept");
    assert!(
        result
            .content
            .contains("bytes dropped; the original was 10008 bytes,"),
        "{}",
        result.content
    );
    assert!(result.content.len() < 600);
}

#[tokio::test]
async fn a_cancelled_call_reports_cancellation() {
    let (_dir, ctx) = workspace();
    ctx.cancel.cancel();
    let result = run(&registry(), &ctx, "hang", json!({})).await;
    assert_eq!(result.outcome, ToolOutcome::Error(ToolFailure::Cancelled));
    assert!(result.content.contains("hang was cancelled"));
}

#[tokio::test]
async fn respond_to_model_continues_and_fatal_aborts() {
    let (_dir, ctx) = workspace();
    let registry = registry();
    let refused = run(&registry, &ctx, "refuse", json!({})).await;
    assert_eq!(refused.outcome, ToolOutcome::Error(ToolFailure::Refused));
    assert_eq!(refused.content, "the file is locked; try again later");
    assert!(refused.is_error() && !refused.is_fatal());
    let fatal = run(&registry, &ctx, "die", json!({})).await;
    assert_eq!(
        fatal.outcome,
        ToolOutcome::Fatal("credentials revoked".into())
    );
    assert!(fatal.is_error() && fatal.is_fatal());
}

#[tokio::test]
async fn dispatch_publishes_started_and_finished_events() {
    let (_dir, ctx) = workspace();
    let events = Recorded::default();
    let ctx = ctx.with_events(events.clone());
    let _ = run(&registry(), &ctx, "refuse", json!({})).await;
    let published = events.take();
    assert_eq!(published.len(), 2, "{published:?}");
    assert_eq!(
        published[0],
        Event::ToolCallStarted {
            agent: "tester".into(),
            tool: "refuse".into(),
            call_id: "call_1".into()
        }
    );
    match &published[1] {
        Event::ToolCallFinished {
            tool,
            call_id,
            is_error,
            ..
        } => {
            assert_eq!(
                (tool.as_str(), call_id.as_str(), *is_error),
                ("refuse", "call_1", true)
            );
        }
        other => panic!("unexpected event {other:?}"),
    }
}
