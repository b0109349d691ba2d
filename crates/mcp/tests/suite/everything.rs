//! Tools of the reference server `server-everything`, called through the registry's dispatch.

use std::time::Duration;

use serde_json::json;
use troupe_mcp::RegisterMcp;
use troupe_tools::{ToolFailure, ToolRegistry};

use super::support::{everything, run};

#[tokio::test]
async fn lists_tools_with_their_schemas_under_the_server_prefix() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    let server = registry.register_mcp("everything", config).await.unwrap();
    let names = server.tool_names();
    assert!(names.contains(&"everything__echo".to_string()), "{names:?}");
    assert!(
        names.contains(&"everything__get-sum".to_string()),
        "{names:?}"
    );
    assert_eq!(registry.names(), names);
    let echo = registry
        .definitions()
        .into_iter()
        .find(|d| d.name == "everything__echo")
        .unwrap();
    assert_eq!(echo.description, "Echoes back the input string");
    assert_eq!(echo.parameters["type"], "object");
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");
    assert_eq!(echo.parameters["required"], json!(["message"]));
    assert!(
        echo.parameters.get("$schema").is_none(),
        "{}",
        echo.parameters
    );
}

#[tokio::test]
async fn echo_and_sum_answer_through_dispatch() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    registry.register_mcp("everything", config).await.unwrap();
    let echo = run(
        &registry,
        "everything__echo",
        json!({"message": "hello troupe"}),
    )
    .await;
    assert!(!echo.is_error(), "{}", echo.content);
    assert!(echo.content.contains("hello troupe"), "{}", echo.content);
    let sum = run(&registry, "everything__get-sum", json!({"a": 2, "b": 3.5})).await;
    assert!(!sum.is_error(), "{}", sum.content);
    assert!(sum.content.contains("5.5"), "{}", sum.content);
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_become_results() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    registry.register_mcp("everything", config).await.unwrap();
    let wrong_type = run(
        &registry,
        "everything__get-sum",
        json!({"a": "two", "b": 3}),
    )
    .await;
    assert_eq!(
        wrong_type.failure(),
        Some(&ToolFailure::InvalidArguments {
            field: Some("a".into())
        }),
        "{}",
        wrong_type.content
    );
    assert!(
        wrong_type.content.contains("a (number, required)"),
        "{}",
        wrong_type.content
    );
    let missing = run(&registry, "everything__echo", json!({})).await;
    assert!(
        missing.content.contains("missing field \"message\""),
        "{}",
        missing.content
    );
    let malformed = registry
        .dispatch(
            &troupe_protocol::ToolCall::new("c", "everything__echo", "{not json"),
            &super::support::ctx(),
        )
        .await;
    assert_eq!(malformed.failure(), Some(&ToolFailure::MalformedArguments));
    let unknown = run(&registry, "everything__ecko", json!({"message": "x"})).await;
    assert_eq!(unknown.failure(), Some(&ToolFailure::UnknownTool));
    assert!(
        unknown.content.contains("everything__echo"),
        "{}",
        unknown.content
    );
}

#[tokio::test]
async fn images_are_described_and_structured_content_is_kept() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    registry.register_mcp("everything", config).await.unwrap();
    let image = run(&registry, "everything__get-tiny-image", json!({})).await;
    assert!(!image.is_error(), "{}", image.content);
    assert!(
        image.content.contains("[image: image/png, "),
        "{}",
        image.content
    );
    assert!(image.content.contains("not shown]"), "{}", image.content);
    let weather = run(
        &registry,
        "everything__get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await;
    assert!(!weather.is_error(), "{}", weather.content);
    assert!(
        weather.content.contains("temperature"),
        "{}",
        weather.content
    );
}

#[tokio::test]
async fn oversized_output_is_cut_by_the_registry_cap() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    registry.register_mcp("everything", config).await.unwrap();
    registry.set_output_cap(200);
    let long = "x".repeat(5000);
    let echo = run(&registry, "everything__echo", json!({"message": long})).await;
    assert!(!echo.is_error(), "{}", echo.content);
    assert!(
        echo.content.contains("[... output truncated:"),
        "{}",
        echo.content
    );
    assert!(echo.content.len() < 600, "{}", echo.content.len());
}

#[tokio::test]
async fn a_slow_tool_hits_the_timeout_and_the_server_keeps_serving() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    let config = config.call_timeout(Duration::from_millis(300));
    registry.register_mcp("everything", config).await.unwrap();
    let slow = run(
        &registry,
        "everything__trigger-long-running-operation",
        json!({"duration": 30, "steps": 3}),
    )
    .await;
    assert_eq!(
        slow.failure(),
        Some(&ToolFailure::TimedOut),
        "{}",
        slow.content
    );
    assert!(
        slow.content.contains("did not finish within 300 ms"),
        "{}",
        slow.content
    );
    let echo = run(
        &registry,
        "everything__echo",
        json!({"message": "still here"}),
    )
    .await;
    assert!(echo.content.contains("still here"), "{}", echo.content);
}

#[tokio::test]
async fn a_server_sees_only_the_basic_environment_and_its_own_variables() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    let config = config.env("TROUPE_TEST_MARKER", "set-by-config");
    registry.register_mcp("everything", config).await.unwrap();
    let env = run(&registry, "everything__get-env", json!({})).await;
    assert!(!env.is_error(), "{}", env.content);
    assert!(env.content.contains("set-by-config"), "{}", env.content);
    assert!(env.content.contains("\"PATH\""), "{}", env.content);
    // This test process has it (it names the server); a secret would be just the same.
    assert!(std::env::var("TROUPE_MCP_EVERYTHING").is_ok());
    assert!(
        !env.content.contains("TROUPE_MCP_EVERYTHING"),
        "{}",
        env.content
    );
}

#[tokio::test]
async fn resources_and_resource_links_are_described() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    registry.register_mcp("everything", config).await.unwrap();
    let reference = run(
        &registry,
        "everything__get-resource-reference",
        json!({"resourceType": "Text", "resourceId": 1}),
    )
    .await;
    assert!(!reference.is_error(), "{}", reference.content);
    assert!(
        reference.content.contains("[resource "),
        "{}",
        reference.content
    );
    let links = run(
        &registry,
        "everything__get-resource-links",
        json!({"count": 2}),
    )
    .await;
    assert!(!links.is_error(), "{}", links.content);
    assert_eq!(
        links.content.matches("[resource link ").count(),
        2,
        "{}",
        links.content
    );
}
