//! `troupe chat` ends its MCP servers, and whatever they started, when it exits — also a
//! server that ignores the end of its input.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether process `pid` is still running (a zombie is not).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

#[test]
fn chat_ends_its_mcp_servers_when_it_exits() {
    let python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !python {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "python3 is needed"
        );
        eprintln!("skipped: no python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/mcp/tests/hostile_server.py"
    );
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[models.remote]
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "TEST_CHAT_KEY"
model = "test-model"
context_window = 8000

[mcp.servers.sticky]
command = "python3"
args = [{script:?}, "grandchild", {pids:?}]

[agents.assistant]
model = "remote"
tools = ["mcp:sticky"]
"#
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["chat", "--config"])
        .arg(&config)
        .arg("--session")
        .arg(dir.path().join("s.jsonl"))
        .env("TEST_CHAT_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"/exit\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&pids).expect("the server started and wrote its pids");
    let pids: Vec<u32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{text}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| running(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = pids.into_iter().filter(|p| running(*p)).collect();
    assert!(left.is_empty(), "still running after chat exited: {left:?}");
}
