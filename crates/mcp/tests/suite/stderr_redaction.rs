//! A server's stderr reaches error messages and tool results (and so the model's provider) only
//! redacted. Needs `python3` (which `.ci/run` requires), no reference server.

use serde_json::json;
use troupe_mcp::{McpServerConfig, RegisterMcp};
use troupe_tools::ToolRegistry;

use super::support::run;

/// Parts of the credentials `tests/leaky_stderr_server.py` writes to stderr.
const LEAKED: &[&str] = &[
    "LeakedKey0123456789",
    "LeakedGithubToken",
    "wJalrXUtnFEMI/K7MDENG",
    "LeakedAnthropicKey",
];

#[tokio::test]
async fn a_crashing_servers_stderr_reaches_the_tool_result_redacted() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/leaky_stderr_server.py");
    let mut registry = ToolRegistry::new();
    let config = McpServerConfig::stdio("python3")
        .arg(script)
        .max_restarts(0);
    registry.register_mcp("leaky", config).await.unwrap();
    let result = run(&registry, "leaky__crash", json!({})).await;
    assert!(result.is_error(), "{}", result.content);
    // The stderr tail is there, explaining the crash…
    assert!(result.content.contains("its stderr"), "{}", result.content);
    assert!(result.content.contains("Traceback"), "{}", result.content);
    assert!(result.content.contains("[redacted]"), "{}", result.content);
    // …without the credentials in it.
    for leaked in LEAKED {
        assert!(
            !result.content.contains(leaked),
            "`{leaked}` reached the tool result: {}",
            result.content
        );
    }
}

#[tokio::test]
async fn a_server_failing_to_start_is_reported_with_its_stderr_redacted() {
    let mut registry = ToolRegistry::new();
    // The key comes from the server's environment, so the command line (also in the message)
    // does not hold it.
    let config = McpServerConfig::stdio("sh")
        .args(["-c", "echo \"missing scope for token=$LEAK\" >&2; exit 3"])
        .env("LEAK", "ghp_LeakedGithubToken0123456789abcdefAB");
    let err = registry.register_mcp("broken", config).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("missing scope for token"), "{message}");
    assert!(!message.contains("LeakedGithubToken"), "{message}");
}
