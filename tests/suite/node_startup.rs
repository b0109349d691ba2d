//! `troupe node` refuses what it cannot run, saying what is missing: no cookie, no agents, a
//! busy port, a weak cookie; and it warns when it listens beyond loopback without TLS.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::support::node_process::{COOKIE, NodeProcess, write_config};

#[test]
fn troupe_node_without_a_cookie_or_agents_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let no_cookie = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["node", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .env_remove("TROUPE_COOKIE")
        .output()
        .unwrap();
    assert!(!no_cookie.status.success());
    let stderr = String::from_utf8_lossy(&no_cookie.stderr);
    assert!(stderr.contains("$TROUPE_COOKIE"), "{stderr}");

    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let no_agents = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["node", "--listen", "127.0.0.1:0", "--config"])
        .arg(&empty)
        .env("TROUPE_COOKIE", COOKIE)
        .output()
        .unwrap();
    assert!(!no_agents.status.success());
    let stderr = String::from_utf8_lossy(&no_agents.stderr);
    assert!(stderr.contains("no agent"), "{stderr}");
}

/// `troupe node` with `config`, listening on `listen`, with `cookie`: its output once it exits
/// (it must, within 30 s: these settings are refused at start).
fn node_output(config: &Path, listen: &str, cookie: &str) -> std::process::Output {
    let mut child = NodeProcess(
        Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args(["node", "--name", "remote", "--listen", listen, "--config"])
            .arg(config)
            .env("TROUPE_COOKIE", cookie)
            .env("TEST_NODE_KEY", "sk-test")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "troupe node started although it should have refused"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = Vec::new();
    std::io::Read::read_to_end(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    std::process::Output {
        status,
        stdout: Vec::new(),
        stderr,
    }
}

#[test]
fn troupe_node_names_a_busy_port_once_and_refuses_a_weak_cookie_saying_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let busy = node_output(&config, &addr.to_string(), COOKIE);
    assert!(!busy.status.success());
    let stderr = String::from_utf8_lossy(&busy.stderr);
    assert_eq!(
        stderr
            .matches(&format!("address {addr} is already in use"))
            .count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    let weak = node_output(&config, "127.0.0.1:0", "node-test-cookie");
    assert!(!weak.status.success());
    let stderr = String::from_utf8_lossy(&weak.stderr);
    assert!(stderr.contains("openssl rand -hex 32"), "{stderr}");
}

#[test]
fn troupe_node_warns_when_it_listens_beyond_loopback_without_tls() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let mut child = NodeProcess(
        Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args([
                "node",
                "--name",
                "remote",
                "--listen",
                "0.0.0.0:0",
                "--config",
            ])
            .arg(&config)
            .env("TROUPE_COOKIE", COOKIE)
            .env("TEST_NODE_KEY", "sk-test")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.stdout.take().unwrap();
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.starts_with("READY "));
    assert!(ready, "troupe node exited early");
    child.kill().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("warning:") && stderr.contains("0.0.0.0") && stderr.contains("without TLS"),
        "{stderr}"
    );
}
