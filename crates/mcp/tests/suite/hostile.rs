//! Servers that misbehave on purpose (`tests/hostile_server.py`): each failure is reported for
//! what it is, within bounds, and no server outlives its registration.

use std::time::Duration;

use serde_json::json;
use troupe_mcp::{McpError, RegisterMcp};
use troupe_tools::{ToolFailure, ToolRegistry};

use super::support::{hostile, run, still_running_after};

#[tokio::test]
async fn an_answer_over_16_mib_is_reported_as_too_large_not_as_a_timeout() {
    for mode in ["huge", "huge_no_id"] {
        let Some(config) = hostile(mode, &[]) else {
            return;
        };
        let mut registry = ToolRegistry::new();
        let config = config.call_timeout(Duration::from_secs(30));
        registry.register_mcp("big", config).await.unwrap();
        let result = run(&registry, "big__echo", json!({})).await;
        assert_eq!(
            result.failure(),
            Some(&ToolFailure::Refused),
            "{mode}: {}",
            result.content
        );
        assert!(
            result.content.contains("too large") && result.content.contains("16 MiB"),
            "{mode}: {}",
            result.content
        );
        // The server is still usable: the oversized line was skipped, not the connection.
        let again = run(&registry, "big__echo", json!({})).await;
        assert!(
            again.content.contains("too large"),
            "{mode}: {}",
            again.content
        );
    }
}

#[tokio::test]
async fn a_tools_list_that_never_answers_is_reported_as_tools_list_not_initialize() {
    let Some(config) = hostile("list_hang", &[]) else {
        return;
    };
    let mut registry = ToolRegistry::new();
    let config = config.init_timeout(Duration::from_millis(1500));
    let err = registry.register_mcp("mute", config).await.unwrap_err();
    assert!(matches!(err, McpError::ListToolsTimeout { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("answered `initialize` but not `tools/list`"),
        "{message}"
    );
    assert!(
        !message.contains("did not answer `initialize`"),
        "{message}"
    );
}

#[tokio::test]
async fn endless_tools_list_pagination_is_refused_within_bounds() {
    let Some(config) = hostile("paginate_forever", &[]) else {
        return;
    };
    let mut registry = ToolRegistry::new();
    let config = config.init_timeout(Duration::from_secs(60));
    let err = registry.register_mcp("pager", config).await.unwrap_err();
    assert!(matches!(err, McpError::ListTools { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("past 1000 pages"), "{message}");
    assert!(registry.is_empty());
}

#[tokio::test]
async fn a_refusal_reaches_the_model_even_when_the_relist_after_it_hangs() {
    let Some(config) = hostile("refuse_then_hang", &[]) else {
        return;
    };
    let mut registry = ToolRegistry::new();
    let config = config
        .call_timeout(Duration::from_secs(5))
        .init_timeout(Duration::from_secs(30));
    registry.register_mcp("fickle", config).await.unwrap();
    let result = run(&registry, "fickle__echo", json!({})).await;
    assert_eq!(
        result.failure(),
        Some(&ToolFailure::Refused),
        "{}",
        result.content
    );
    assert!(
        result.content.contains("no tool `echo` here any more"),
        "{}",
        result.content
    );
}

/// The server's and its forked child's pids, once the server wrote them.
async fn pids_in(file: &std::path::Path) -> Vec<u32> {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(pids) = text
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<Vec<u32>, _>>()
            && pids.len() == 2
        {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server wrote no pids to {}", file.display());
}

#[tokio::test]
async fn a_dropped_server_is_killed_with_what_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let Some(config) = hostile("grandchild", &[file.to_str().unwrap()]) else {
        return;
    };
    let mut registry = ToolRegistry::new();
    let server = registry.register_mcp("sticky", config).await.unwrap();
    let pids = pids_in(&file).await;
    assert_eq!(server.pid().await, Some(pids[0]));
    drop(server);
    drop(registry);
    let left =
        tokio::task::spawn_blocking(move || still_running_after(&pids, Duration::from_secs(10)))
            .await
            .unwrap();
    assert!(left.is_empty(), "still running: {left:?}");
}

#[tokio::test]
async fn shutdown_kills_a_server_that_ignores_the_end_of_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let Some(config) = hostile("grandchild", &[file.to_str().unwrap()]) else {
        return;
    };
    let mut registry = ToolRegistry::new();
    let server = registry.register_mcp("sticky", config).await.unwrap();
    let pids = pids_in(&file).await;
    server.shutdown().await;
    let left =
        tokio::task::spawn_blocking(move || still_running_after(&pids, Duration::from_secs(10)))
            .await
            .unwrap();
    assert!(left.is_empty(), "still running: {left:?}");
    // The registry still holds the tools: the next call starts the server again.
    let again = run(&registry, "sticky__echo", json!({})).await;
    assert_eq!(again.content, "ok");
}

#[test]
fn servers_are_killed_when_the_runtime_shuts_down() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let Some(config) = hostile("grandchild", &[file.to_str().unwrap()]) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let pids = runtime.block_on(async {
        let mut registry = ToolRegistry::new();
        registry.register_mcp("sticky", config).await.unwrap();
        let pids = pids_in(&file).await;
        // Held by a task until the runtime drops it, as an agent holds its tools.
        tokio::spawn(async move {
            let _held = registry;
            std::future::pending::<()>().await;
        });
        pids
    });
    drop(runtime);
    let left = still_running_after(&pids, Duration::from_secs(10));
    assert!(left.is_empty(), "still running: {left:?}");
}
