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

impl NodeProcess {
    /// Freeze it (SIGSTOP): alive, silent, its connections open.
    pub(crate) fn signal_stop(&self) {
        self.signal("-STOP");
    }

    /// Wake it (SIGCONT).
    pub(crate) fn signal_cont(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .arg(signal)
            .arg(self.0.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success(), "kill {signal} failed");
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
    start_node_with(config, trace, &[], &[])
}

/// [`start_node`] with more arguments and environment variables.
pub(crate) fn start_node_with(
    config: &Path,
    trace: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (NodeProcess, SocketAddr) {
    let child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "node",
            "--name",
            "remote",
            "--listen",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(config)
        .args(args)
        .envs(env.iter().copied())
        .env("TROUPE_COOKIE", COOKIE)
        .env("TEST_NODE_KEY", "sk-test")
        .env("TROUPE_TRACE", trace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    wait_ready(child)
}

/// A started `troupe node` (stdout piped) once it printed `READY ADDRESS`: the process and the
/// address; the rest of its stdout is drained.
pub(crate) fn wait_ready(mut child: Child) -> (NodeProcess, SocketAddr) {
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("troupe node exited early").unwrap();
        if let Some(addr) = line.strip_prefix("READY ") {
            break addr.trim().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
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

/// Ask `agent` on the node at `addr` from a node of this process (a team of its own, gone after).
pub(crate) fn ask_over_the_cluster(
    addr: SocketAddr,
    agent: &str,
    text: &str,
) -> Result<String, troupe::AskError> {
    use troupe::cluster::{ClusterNode, NodeConfig};
    use troupe::{AgentRequest, Team, TeamConfig};
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let node = ClusterNode::start(&team, NodeConfig::new("local", COOKIE))
                .await
                .unwrap();
            node.connect(addr).await.unwrap();
            let request = AgentRequest::from_user(text);
            let answer = team
                .ask_with(agent, request, std::time::Duration::from_secs(120))
                .await;
            node.shutdown().await;
            team.shutdown().await;
            answer
        })
}
