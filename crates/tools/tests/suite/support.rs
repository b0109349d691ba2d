//! Helpers shared by the suites.

use tempfile::TempDir;
use troupe_runtime::ToolCall;
use troupe_tools::{ToolContext, ToolRegistry, ToolResult};

/// A tool call with a fixed id.
pub fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall::new("call_1", name, arguments)
}

/// A temporary workspace and a context rooted in it.
pub fn workspace() -> (TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new("tester", dir.path());
    (dir, ctx)
}

/// Dispatch `name(arguments)` through `registry` under `ctx`.
pub async fn run(
    registry: &ToolRegistry,
    ctx: &ToolContext,
    name: &str,
    arguments: serde_json::Value,
) -> ToolResult {
    registry
        .dispatch(&call(name, &arguments.to_string()), ctx)
        .await
}

/// Asserts that `result` is a refusal whose text says `reason`.
#[track_caller]
pub fn assert_refused(result: &ToolResult, reason: &str) {
    assert_eq!(
        result.failure(),
        Some(&troupe_tools::ToolFailure::Refused),
        "{}",
        result.content
    );
    assert!(result.content.contains(reason), "{}", result.content);
}
