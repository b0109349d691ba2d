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

/// Whether python3 runs here (it runs the hostile server); outside CI its absence skips a test.
fn have_python() -> bool {
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
    }
    python
}

/// `troupe chat` with one MCP server that forks a grandchild and ignores the end of its input;
/// both write their pids to the returned file.
fn start_chat(dir: &std::path::Path) -> (std::process::Child, std::path::PathBuf) {
    let pids = dir.join("pids");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/mcp/tests/hostile_server.py"
    );
    let config = dir.join("troupe.toml");
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
    let child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["chat", "--config"])
        .arg(&config)
        .arg("--session")
        .arg(dir.join("s.jsonl"))
        .env("TEST_CHAT_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, pids)
}

/// The two pids the server wrote, once it wrote both (waits at most 30 s).
fn server_pids(pids: &std::path::Path) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(pids).unwrap_or_default();
        let found: Vec<u32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if found.len() == 2 || Instant::now() > deadline {
            assert_eq!(
                found.len(),
                2,
                "the server and its grandchild started: {text}"
            );
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every pid of `pids` ends within 10 s.
fn assert_all_end(pids: Vec<u32>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| running(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = pids.into_iter().filter(|p| running(*p)).collect();
    assert!(left.is_empty(), "still running after chat ended: {left:?}");
}

#[test]
fn chat_ends_its_mcp_servers_when_it_exits() {
    if !have_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut child, pids) = start_chat(dir.path());
    child.stdin.take().unwrap().write_all(b"/exit\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_all_end(server_pids(&pids));
}

/// A terminal that closes (SIGHUP) or a `kill` (SIGTERM) ends chat as `/exit` would: the servers
/// run in process groups of their own, so no signal to chat's group reaches them, and chat itself
/// must end them — also while it waits for input that never comes.
#[test]
fn chat_ends_its_mcp_servers_when_terminated_or_hung_up() {
    if !have_python() {
        return;
    }
    for (signal, word) in [("TERM", "SIGTERM"), ("HUP", "SIGHUP")] {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, pids) = start_chat(dir.path());
        // Keep its input open: chat is waiting for a line when the signal comes.
        let stdin = child.stdin.take().unwrap();
        let pids = server_pids(&pids);
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            panic!("chat still ran 10 s after {word}");
        }
        let output = child.wait_with_output().unwrap();
        drop(stdin);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{word}: {stderr}");
        assert!(stderr.contains(word), "{word}: {stderr}");
        assert_all_end(pids);
    }
}

/// A chat killed outright (SIGKILL: no handler, no `Drop`) still ends its MCP servers: they run
/// in a group whose watchman ends it once chat's end closes the watchman's input.
#[test]
fn chat_ends_its_mcp_servers_when_killed() {
    if !have_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut child, pids) = start_chat(dir.path());
    let stdin = child.stdin.take().unwrap();
    let pids = server_pids(&pids);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    assert!(!status.success());
    assert_all_end(pids);
}
