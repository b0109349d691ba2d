//! The reference MCP servers `.ci/run` installs, and helpers to call their tools.
//!
//! `TROUPE_MCP_EVERYTHING` names `@modelcontextprotocol/server-everything`'s executable and
//! `TROUPE_MCP_TIME` names `mcp-server-time`'s. Under CI (`CI=true`) a missing one fails the
//! test; elsewhere the test says it was skipped and returns.

use troupe_mcp::McpServerConfig;
use troupe_protocol::ToolCall;
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

/// `tests/hostile_server.py MODE ARGS…` (a server that misbehaves on purpose) run by
/// `python3`, if there is one (under CI there must be).
pub fn hostile(mode: &str, args: &[&str]) -> Option<McpServerConfig> {
    let found = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            panic!("python3 is needed for the hostile MCP server tests");
        }
        eprintln!("skipped: no python3 for tests/hostile_server.py");
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hostile_server.py");
    Some(
        McpServerConfig::stdio("python3")
            .arg(script)
            .arg(mode)
            .args(args.iter().copied()),
    )
}

/// Whether process `pid` is still running (a zombie, dead but not yet reaped, is not).
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Wait up to `limit` for every process of `pids` to stop running; the ones still running.
pub fn still_running_after(pids: &[u32], limit: std::time::Duration) -> Vec<u32> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|p| running(*p)).collect();
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `tests/file_writer_server.py` (a server that writes files and connects where asked) run by
/// the Python of the venv `mcp-server-time` is installed in; if installed.
pub fn file_writer() -> Option<McpServerConfig> {
    let time = std::path::PathBuf::from(server("TROUPE_MCP_TIME")?);
    let python = time.with_file_name("python");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/file_writer_server.py");
    Some(McpServerConfig::stdio(python.to_string_lossy().into_owned()).arg(script))
}
