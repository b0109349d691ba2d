//! Helpers shared by the suites.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tempfile::TempDir;
use troupe_protocol::{Event, EventSink, ToolCall, TraceId};
use troupe_tools::{ToolContext, ToolRegistry, ToolResult};

/// A tool call with a fixed id.
pub fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall::new("call_1", name, arguments)
}

/// An event sink that keeps what a tool call published, in order (clones share the list).
#[derive(Debug, Clone, Default)]
pub struct Recorded(Arc<Mutex<Vec<Event>>>);

impl Recorded {
    /// The events published so far; the list starts empty again.
    pub fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl EventSink for Recorded {
    fn publish(&self, _trace_id: Option<TraceId>, event: Event) {
        self.0.lock().unwrap().push(event);
    }
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

/// `parent/ws` (the root, holding `d/f.txt` = "inside") and `parent/outside` (holding
/// `f.txt` = "secret").
pub fn setup() -> (tempfile::TempDir, PathBuf, ToolContext) {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("ws");
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("d/f.txt"), "inside\n").unwrap();
    std::fs::create_dir(parent.path().join("outside")).unwrap();
    std::fs::write(parent.path().join("outside/f.txt"), "secret\n").unwrap();
    let ctx = ToolContext::new("tester", &root);
    (parent, root, ctx)
}

/// Replace the directory `root/d` by a symlink to `outside`, as a racing process would between
/// the tool's check and its open.
pub fn swap_in_symlink(root: &Path, outside: &Path) {
    std::fs::rename(root.join("d"), root.join("d_moved")).unwrap();
    symlink(outside, root.join("d")).unwrap();
}
