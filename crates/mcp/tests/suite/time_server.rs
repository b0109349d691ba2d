//! `mcp-server-time`: a Python server, a successful call and a tool error (`isError`).

use serde_json::json;
use troupe_mcp::RegisterMcp;
use troupe_tools::{ToolFailure, ToolRegistry};

use super::support::{run, time};

#[tokio::test]
async fn get_current_time_answers_and_a_bad_timezone_is_a_tool_error() {
    let Some(config) = time() else { return };
    let mut registry = ToolRegistry::new();
    let server = registry.register_mcp("time", config).await.unwrap();
    assert!(
        server
            .tool_names()
            .contains(&"time__get_current_time".to_string()),
        "{:?}",
        server.tool_names()
    );
    let now = run(
        &registry,
        "time__get_current_time",
        json!({"timezone": "Etc/UTC"}),
    )
    .await;
    assert!(!now.is_error(), "{}", now.content);
    assert!(now.content.contains("\"timezone\""), "{}", now.content);
    assert!(now.content.contains("Etc/UTC"), "{}", now.content);
    let bad = run(
        &registry,
        "time__get_current_time",
        json!({"timezone": "Mars/Olympus"}),
    )
    .await;
    assert_eq!(
        bad.failure(),
        Some(&ToolFailure::Refused),
        "{}",
        bad.content
    );
    assert!(
        bad.content.contains("time__get_current_time failed"),
        "{}",
        bad.content
    );
    assert!(bad.content.contains("Mars/Olympus"), "{}", bad.content);
}
