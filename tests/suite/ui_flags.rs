//! `--ui` on the binary: `troupe node --ui` and `troupe chat --ui` print the live view's URL,
//! and that URL serves the page (its token in it; without it, refused); a node's agent that its
//! budget paused is raised from that page, though the node handed the view no budget.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::support::chat::{chat_command, write_config as chat_config};
use super::support::chat_server::ChatServer;
use super::support::live_view::{get, lines};
use super::support::node_process::{
    COOKIE, NodeProcess, one_node_at_a_time, write_config as node_config,
};

/// The status line of a POST of the JSON `body` to `url` (`http://HOST:PORT/PATH`) with the
/// view's `token`, from the page's own origin, over a plain socket.
fn post(url: &str, token: &str, body: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n\
         x-troupe-token: {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

/// The URL of the `live view: URL` line, among the lines before `until` (if given).
fn view_url(lines: &mpsc::Receiver<String>, until: Option<&str>) -> String {
    let mut url = None;
    let mut seen = Vec::new();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no live view URL within 60 s; printed: {seen:?}"));
        if let Some(u) = line.strip_prefix("live view: ") {
            url = Some(u.to_string());
            if until.is_none() {
                break;
            }
        }
        if until.is_some_and(|u| line.starts_with(u)) {
            break;
        }
        seen.push(line);
    }
    url.unwrap_or_else(|| panic!("no live view URL before {until:?}; printed: {seen:?}"))
}

/// The URL serves the page with its token, and nothing without it.
fn serves_the_page(url: &str) {
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(url.contains("/?token="), "{url}");
    let (status, body) = get(url);
    assert!(status.contains("200"), "{status}");
    assert!(body.contains("<title>troupe</title>"), "{body}");
    let base = url.split('?').next().unwrap();
    let (refused, _) = get(base);
    assert!(refused.contains("401"), "{refused}");
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn troupe_node_ui_prints_a_url_that_serves_the_page_before_ready() {
    let _one = one_node_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let config = node_config(dir.path(), "http://127.0.0.1:9/v1");
    let mut node = NodeProcess(
        Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args([
                "node",
                "--name",
                "remote",
                "--listen",
                "127.0.0.1:0",
                "--ui",
            ])
            .arg("--config")
            .arg(&config)
            .env("TROUPE_COOKIE", COOKIE)
            .env("TEST_NODE_KEY", "sk-test")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let lines = lines(node.0.stdout.take().unwrap());
    let url = view_url(&lines, Some("READY "));
    serves_the_page(&url);
    kill(&mut node.0);
}

#[test]
fn troupe_chat_ui_prints_a_url_that_serves_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let config = chat_config(dir.path(), "http://127.0.0.1:9/v1");
    let mut chat = chat_command(&config, &dir.path().join("chat.jsonl"))
        .arg("--ui")
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    let lines = lines(chat.stdout.take().unwrap());
    let url = view_url(&lines, None);
    serves_the_page(&url);
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let status = chat.wait().unwrap();
    assert!(status.success(), "{status}");
    kill(&mut chat);
}

#[test]
fn a_paused_budget_of_troupe_node_is_raised_from_its_live_view() {
    let _one = one_node_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // Every answer of the server spends 2 output tokens: the helper's agent budget is spent
    // after its first answer, and its next request pauses.
    let server = ChatServer::start();
    let config = node_config(dir.path(), &server.url);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("budget = { agent = { output_tokens = 2 }, on_exceeded = \"pause\" }\n");
    std::fs::write(&config, text).unwrap();
    let mut node = NodeProcess(
        Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args([
                "node",
                "--name",
                "remote",
                "--listen",
                "127.0.0.1:0",
                "--ui",
            ])
            .arg("--config")
            .arg(&config)
            .env("TROUPE_COOKIE", COOKIE)
            .env("TEST_NODE_KEY", "sk-test")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let lines = lines(node.0.stdout.take().unwrap());
    let (mut url, mut addr) = (None, None);
    while addr.is_none() {
        let line = lines.recv_timeout(Duration::from_secs(60)).unwrap();
        if let Some(u) = line.strip_prefix("live view: ") {
            url = Some(u.to_string());
        }
        if let Some(a) = line.strip_prefix("READY ") {
            addr = Some(a.trim().parse::<std::net::SocketAddr>().unwrap());
        }
    }
    let (url, addr) = (url.expect("a live view URL before READY"), addr.unwrap());
    let token = url.split("token=").nth(1).unwrap().to_string();
    let base = url.split('?').next().unwrap().to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let team = troupe::Team::start(troupe::TeamConfig::default())
            .await
            .unwrap();
        let cluster = troupe::cluster::ClusterNode::start(
            &team,
            troupe::cluster::NodeConfig::new("local", COOKIE),
        )
        .await
        .unwrap();
        assert_eq!(cluster.connect(addr).await.unwrap(), "remote");
        let ask = |text: &'static str| {
            let directory = team.directory().clone();
            tokio::spawn(async move {
                directory
                    .ask(
                        "helper",
                        troupe::AgentRequest::from_user(text),
                        Duration::from_secs(60),
                    )
                    .await
            })
        };
        assert_eq!(ask("hi").await.unwrap().unwrap(), "reply 1");
        let paused = ask("again");
        // The page shows the helper paused; raising its budget there lets it go on.
        let raised = tokio::task::spawn_blocking(move || {
            let snapshot = format!("{base}api/snapshot?token={token}");
            loop {
                let (_, body) = get(&snapshot);
                let view: serde_json::Value = serde_json::from_str(&body).unwrap();
                let state = view["agents"]
                    .as_array()
                    .and_then(|agents| agents.iter().find(|a| a["name"] == "helper"))
                    .map(|a| a["state"].clone());
                if state.is_some_and(|s| s == "paused_by_budget") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let raise = r#"{"agent": "helper", "scope": "agent", "limit": {"output_tokens": 100}}"#;
            post(&format!("{base}api/budgets/raise"), &token, raise)
        })
        .await
        .unwrap();
        assert!(raised.contains("204"), "{raised}");
        assert_eq!(paused.await.unwrap().unwrap(), "reply 2");
        cluster.shutdown().await;
        team.shutdown().await;
    });
    assert_eq!(server.count(), 2);
    kill(&mut node.0);
}
