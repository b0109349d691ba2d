//! A server killed mid-call: the call gets a clear tool error, the next call starts it again,
//! and restarts are bounded.

use serde_json::json;
use troupe_mcp::RegisterMcp;
use troupe_tools::{ToolFailure, ToolRegistry};

use super::support::{everything, kill, run};

#[tokio::test]
async fn a_server_killed_mid_call_is_reported_and_restarted_on_next_use() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    let server = registry.register_mcp("everything", config).await.unwrap();
    let first_pid = server.pid().await.unwrap();
    let slow = {
        let registry = registry.clone();
        tokio::spawn(async move {
            run(
                &registry,
                "everything__trigger-long-running-operation",
                json!({"duration": 60, "steps": 2}),
            )
            .await
        })
    };
    // Give the call time to reach the server; if it has not yet, the server is gone when it
    // does, and the assertions below hold just the same.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    kill(first_pid);
    let result = slow.await.unwrap();
    assert_eq!(
        result.failure(),
        Some(&ToolFailure::Refused),
        "{}",
        result.content
    );
    assert!(
        result.content.contains("MCP server `everything`"),
        "{}",
        result.content
    );
    let echo = run(&registry, "everything__echo", json!({"message": "back"})).await;
    assert!(!echo.is_error(), "{}", echo.content);
    assert!(echo.content.contains("back"), "{}", echo.content);
    let second_pid = server.pid().await.unwrap();
    assert_ne!(first_pid, second_pid);
}

#[tokio::test]
async fn restarts_are_bounded() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    let server = registry
        .register_mcp("everything", config.max_restarts(1))
        .await
        .unwrap();
    kill(server.pid().await.unwrap());
    // The first call after the kill may still find the dead connection (and retire it); the
    // next one starts the server again — its one restart.
    let first = run(&registry, "everything__echo", json!({"message": "one"})).await;
    let first = if first.is_error() {
        assert!(
            first.content.contains("stopped before answering"),
            "{}",
            first.content
        );
        run(&registry, "everything__echo", json!({"message": "one"})).await
    } else {
        first
    };
    assert!(!first.is_error(), "{}", first.content);
    assert!(first.content.contains("one"), "{}", first.content);
    kill(server.pid().await.unwrap());
    let second = run(&registry, "everything__echo", json!({"message": "two"})).await;
    let second = if second.content.contains("stopped before answering") {
        run(&registry, "everything__echo", json!({"message": "two"})).await
    } else {
        second
    };
    assert!(second.is_error(), "{}", second.content);
    assert!(
        second
            .content
            .contains("exited again after 1 restarts, its limit"),
        "{}",
        second.content
    );
}
