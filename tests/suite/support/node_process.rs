//! `troupe node` as a child process for the tests: its config, its start (the `READY` line),
//! one node per test at a time, and the spans of its trace file.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use troupe::protocol::trace::{SpanLine, TraceLine};

/// A cookie as `openssl rand -hex 32` makes them (`troupe node` refuses a weak one).
pub(crate) const COOKIE: &str = "b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c";

/// A process holds one cluster node at a time: ractor's process groups are process-wide, so two
/// tests' nodes in this test binary would see each other's agents (both nodes here are named
/// `remote` and host `helper`) and a request could be answered by the other test's node.
pub(crate) fn one_node_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static NODES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    NODES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn write_config(dir: &Path, url: &str) -> std::path::PathBuf {
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

/// A `troupe node` process, killed if a failing test leaves it running.
pub(crate) struct NodeProcess(pub(crate) Child);

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for NodeProcess {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for NodeProcess {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// `troupe node` on `config`; returns the process and the address from its `READY` line.
pub(crate) fn start_node(config: &Path, trace: &Path) -> (NodeProcess, SocketAddr) {
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
    (NodeProcess(child), addr)
}

pub(crate) fn spans(path: &Path) -> Vec<SpanLine> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| match serde_json::from_str::<TraceLine>(l) {
            Ok(TraceLine::Span(span)) => Some(span),
            _ => None,
        })
        .collect()
}

pub(crate) fn attr<'a>(span: &'a SpanLine, key: &str) -> Option<&'a str> {
    span.attributes.get(key).and_then(|v| v.as_str())
}
