//! Streamable HTTP: a troupe registry served by rmcp's HTTP server on 127.0.0.1, registered
//! from its URL and called through the registry's dispatch.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_mcp::{McpError, McpServerConfig, RegisterMcp, RegistryServer};
use troupe_tools::{ToolContext, ToolError, ToolRegistry};

use super::support::run;

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
}

/// Serve a registry with one tool, `add`, at `http://127.0.0.1:PORT/mcp`.
async fn serve_add_over_http() -> String {
    let mut tools = ToolRegistry::new();
    tools
        .register_fn("add", "Add two integers.", |args: AddArgs| async move {
            Ok::<_, ToolError>(args.a + args.b)
        })
        .unwrap();
    let server = RegistryServer::new(
        tools,
        ToolContext::new("mcp", std::env::temp_dir()),
        "adder",
        "1",
    );
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}/mcp")
}

#[tokio::test]
async fn a_server_reached_by_url_registers_and_answers() {
    let url = serve_add_over_http().await;
    let mut registry = ToolRegistry::new();
    let config = McpServerConfig::http(&url).header("x-troupe-test", "1");
    let server = registry.register_mcp("adder", config).await.unwrap();
    assert_eq!(server.tool_names(), ["adder__add"]);
    assert_eq!(server.pid().await, None);
    let sum = run(&registry, "adder__add", json!({"a": 2, "b": 40})).await;
    assert!(!sum.is_error(), "{}", sum.content);
    assert_eq!(sum.content, "42");
    let bad = run(&registry, "adder__add", json!({"a": 2})).await;
    assert!(
        bad.content.contains("missing field \"b\""),
        "{}",
        bad.content
    );
}

#[tokio::test]
async fn an_unreachable_url_fails_registration_naming_it() {
    // Port 9 (discard) on loopback: nothing listens there in a test environment.
    let url = "http://127.0.0.1:9/mcp";
    let mut registry = ToolRegistry::new();
    let config = McpServerConfig::http(url).init_timeout(Duration::from_secs(5));
    let err = registry.register_mcp("gone", config).await.unwrap_err();
    assert!(
        matches!(
            err,
            McpError::Initialize { .. } | McpError::InitializeTimeout { .. }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains(url), "{err}");
}

#[tokio::test]
async fn a_bad_header_is_an_error_naming_it() {
    let mut registry = ToolRegistry::new();
    let config = McpServerConfig::http("http://127.0.0.1:9/mcp").header("bad header", "x");
    let err = registry.register_mcp("h", config).await.unwrap_err();
    assert!(matches!(err, McpError::InvalidHeader { .. }), "{err:?}");
    assert!(err.to_string().contains("header `bad header`"), "{err}");
}

#[tokio::test]
async fn an_answer_over_16_mib_over_http_is_reported_as_too_large() {
    let mut tools = ToolRegistry::new();
    tools
        .register_fn(
            "huge",
            "17 MiB of text.",
            |_: troupe_tools::NoArgs| async move { Ok::<_, ToolError>("x".repeat(17 << 20)) },
        )
        .unwrap();
    tools.set_output_cap(64 << 20);
    let server = RegistryServer::new(
        tools,
        ToolContext::new("mcp", std::env::temp_dir()),
        "big",
        "1",
    );
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let mut registry = ToolRegistry::new();
    let config = McpServerConfig::http(format!("http://{address}/mcp"))
        .call_timeout(Duration::from_secs(20));
    registry.register_mcp("big", config).await.unwrap();
    let result = run(&registry, "big__huge", json!({})).await;
    assert!(result.is_error(), "{}", result.content.len());
    assert!(
        result.content.contains("too large") && result.content.contains("16 MiB"),
        "{}",
        result.content
    );
}
