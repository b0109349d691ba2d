//! `troupe node` as a second process: a config's agent asked by name from this process's node,
//! one trace across both processes' trace files, and clear errors for what a node cannot run.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use troupe::cluster::{ClusterNode, NodeConfig};
use troupe::runtime::trace::{SpanLine, TraceLine};
use troupe::{AgentRequest, Team, TeamConfig};

use super::chat::ChatServer;
use super::support::with_trace_file;

const COOKIE: &str = "node-test-cookie";

fn write_config(dir: &Path, url: &str) -> std::path::PathBuf {
    let config = dir.join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[models.remote]
provider = "openai"
base_url = "{url}"
api_key_env = "TEST_NODE_KEY"
model = "test-model"
context_window = 8000

[agents.helper]
model = "remote"
instructions = "Be brief."
"#
        ),
    )
    .unwrap();
    config
}

/// `troupe node` on `config`; returns the process and the address from its `READY` line.
fn start_node(config: &Path, trace: &Path) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "node",
            "--name",
            "remote",
            "--listen",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(config)
        .env("TROUPE_COOKIE", COOKIE)
        .env("TEST_NODE_KEY", "sk-test")
        .env("TROUPE_TRACE", trace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("troupe node exited early").unwrap();
        if let Some(addr) = line.strip_prefix("READY ") {
            break addr.trim().parse().unwrap();
        }
    };
    (child, addr)
}

fn spans(path: &Path) -> Vec<SpanLine> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| match serde_json::from_str::<TraceLine>(l) {
            Ok(TraceLine::Span(span)) => Some(span),
            _ => None,
        })
        .collect()
}

fn attr<'a>(span: &'a SpanLine, key: &str) -> Option<&'a str> {
    span.attributes.get(key).and_then(|v| v.as_str())
}

#[test]
fn a_config_agent_on_troupe_node_is_asked_by_name_in_one_trace_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let server = ChatServer::start();
    let config = write_config(dir.path(), &server.url);
    let node_trace = dir.path().join("node.jsonl");
    let local_trace = dir.path().join("local.jsonl");
    let (mut child, addr) = start_node(&config, &node_trace);

    let request = AgentRequest::from_user("hello over the wire");
    let trace_id = request.trace.trace_id_hex();
    let answer = with_trace_file(&local_trace, false, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let node = ClusterNode::start(&team, NodeConfig::new("local", COOKIE))
                .await
                .unwrap();
            assert_eq!(node.connect(addr).await.unwrap(), "remote");
            let answer = team
                .ask_with("helper", request, Duration::from_secs(60))
                .await;
            node.shutdown().await;
            team.shutdown().await;
            answer
        })
    });
    assert_eq!(answer.unwrap(), "reply 1");

    // SIGTERM: the node leaves the cluster and flushes its trace file.
    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());

    let local = spans(&local_trace);
    let remote = spans(&node_trace);
    let asking = local
        .iter()
        .find(|s| s.name == "remote_ask")
        .expect("a remote_ask span here");
    assert_eq!(asking.trace_id, trace_id);
    let taking = remote
        .iter()
        .find(|s| s.name == "remote_request")
        .expect("a remote_request span there");
    assert_eq!(taking.trace_id, trace_id, "one trace id in both files");
    assert_eq!(
        taking.parent_span_id.as_deref(),
        Some(asking.span_id.as_str())
    );
    assert_eq!(attr(taking, "troupe.node"), Some("local"));
    let agent = remote
        .iter()
        .find(|s| s.name == "invoke_agent")
        .expect("the agent's span there");
    assert_eq!(agent.trace_id, trace_id);
    assert_eq!(
        agent.parent_span_id.as_deref(),
        Some(taking.span_id.as_str())
    );
    let chat = remote
        .iter()
        .find(|s| s.name == "chat")
        .expect("a model call");
    assert_eq!(chat.trace_id, trace_id);
}

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
