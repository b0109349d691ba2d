//! The reference MCP servers `.ci/run` installs, and helpers to call their tools.
//!
//! `TROUPE_MCP_EVERYTHING` names `@modelcontextprotocol/server-everything`'s executable and
//! `TROUPE_MCP_TIME` names `mcp-server-time`'s. Under CI (`CI=true`) a missing one fails the
//! test; elsewhere the test says it was skipped and returns.

use troupe_mcp::McpServerConfig;
use troupe_runtime::ToolCall;
use troupe_tools::{ToolContext, ToolRegistry, ToolResult};

/// The server an environment variable names, or `None` (with a note) outside CI.
fn server(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(path) if !path.is_empty() => Some(path),
        _ if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!(
                "{var} is not set: under CI the MCP reference servers must be installed by .ci/run"
            )
        }
        _ => {
            eprintln!(
                "skipped: {var} is not set; run .ci/run to install the MCP reference servers"
            );
            None
        }
    }
}

/// `server-everything` over stdio, if installed.
pub fn everything() -> Option<McpServerConfig> {
    server("TROUPE_MCP_EVERYTHING").map(|path| McpServerConfig::stdio(path).arg("stdio"))
}

/// `mcp-server-time`, if installed.
pub fn time() -> Option<McpServerConfig> {
    server("TROUPE_MCP_TIME").map(McpServerConfig::stdio)
}

/// `tests/changing_tools_server.py` (a server whose tool list changes) run by the Python of the
/// venv `mcp-server-time` is installed in, which has the PyPI `mcp` package; if installed.
pub fn changing_tools() -> Option<McpServerConfig> {
    let time = std::path::PathBuf::from(server("TROUPE_MCP_TIME")?);
    let python = time.with_file_name("python");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/changing_tools_server.py"
    );
    Some(McpServerConfig::stdio(python.to_string_lossy().into_owned()).arg(script))
}

/// A context for calls that touch no files.
pub fn ctx() -> ToolContext {
    ToolContext::new("tester", std::env::temp_dir())
}

/// Dispatch `name(arguments)` through `registry`.
pub async fn run(registry: &ToolRegistry, name: &str, arguments: serde_json::Value) -> ToolResult {
    let call = ToolCall::new("call_1", name, arguments.to_string());
    registry.dispatch(&call, &ctx()).await
}

/// Kill a process with SIGKILL.
pub fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -9 {pid} failed");
}
