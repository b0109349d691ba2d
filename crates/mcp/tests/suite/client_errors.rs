//! Servers that cannot be registered: the error names the command. No reference server needed.

use std::time::Duration;

use troupe_mcp::{McpError, McpServerConfig, RegisterMcp};
use troupe_tools::ToolRegistry;

#[tokio::test]
async fn a_server_that_never_answers_initialize_fails_naming_the_command() {
    let mut registry = ToolRegistry::new();
    let config = McpServerConfig::stdio("sleep")
        .arg("30")
        .init_timeout(Duration::from_millis(300));
    let err = registry.register_mcp("silent", config).await.unwrap_err();
    assert!(matches!(err, McpError::InitializeTimeout { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("MCP server `silent`"), "{message}");
    assert!(
        message.contains("`sleep 30` did not answer `initialize`"),
        "{message}"
    );
    assert!(registry.is_empty());
}

#[tokio::test]
async fn a_missing_program_fails_naming_the_command() {
    let mut registry = ToolRegistry::new();
    let config = McpServerConfig::stdio("/nonexistent/mcp-server");
    let err = registry.register_mcp("ghost", config).await.unwrap_err();
    assert!(matches!(err, McpError::Spawn { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("cannot start `/nonexistent/mcp-server`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_server_that_exits_during_initialize_fails_with_its_stderr() {
    let mut registry = ToolRegistry::new();
    let config =
        McpServerConfig::stdio("sh").args(["-c", "echo 'no such module: frobnicate' >&2; exit 3"]);
    let err = registry.register_mcp("broken", config).await.unwrap_err();
    assert!(matches!(err, McpError::Initialize { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("failed to initialize"), "{message}");
    assert!(message.contains("no such module: frobnicate"), "{message}");
}

#[tokio::test]
async fn a_missing_cwd_is_named_rather_than_reported_as_a_missing_program() {
    let mut registry = ToolRegistry::new();
    let config = McpServerConfig::stdio("sh").cwd("/nonexistent/mcp-dir");
    let err = registry.register_mcp("lost", config).await.unwrap_err();
    assert!(matches!(err, McpError::Cwd { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("cwd `/nonexistent/mcp-dir` does not exist"),
        "{message}"
    );
    assert!(!message.contains("No such file"), "{message}");
}
