//! A second node in its own process: this test binary re-run with one ignored test selected.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

use serde::{Deserialize, Serialize};
use troupe_cluster::{NodeConfig, TlsConfig};

const CHILD_ENV: &str = "TROUPE_CLUSTER_TEST_CHILD";

/// What the child node runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ChildSpec {
    pub(crate) name: String,
    pub(crate) cookie: String,
    pub(crate) agents: Vec<String>,
    /// cert, key, ca, server name
    pub(crate) tls: Option<(PathBuf, PathBuf, PathBuf, String)>,
}

impl ChildSpec {
    pub(crate) fn new(name: &str, agents: &[&str]) -> Self {
        ChildSpec {
            name: name.into(),
            cookie: super::COOKIE.into(),
            agents: agents.iter().map(|a| a.to_string()).collect(),
            tls: None,
        }
    }

    fn config(&self) -> NodeConfig {
        let mut config = NodeConfig::new(&self.name, &self.cookie);
        config.tls = self
            .tls
            .clone()
            .map(|(cert, key, ca, server_name)| TlsConfig {
                cert,
                key,
                ca,
                server_name,
            });
        config
    }
}

/// A running child node; killed when dropped.
pub(crate) struct ChildNode {
    pub(crate) process: Child,
    pub(crate) addr: SocketAddr,
    stdin: Option<ChildStdin>,
}

impl ChildNode {
    /// Start a child node and wait until it listens.
    pub(crate) fn start(spec: &ChildSpec) -> ChildNode {
        let mut process = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "suite::support::child::cluster_child_node",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, serde_json::to_string(spec).unwrap())
            // The panic test panics there on purpose: one line, not a backtrace.
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = process.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("the child node exited before it was ready")
                .unwrap();
            if let Some(addr) = super::parse_ready(&line) {
                break addr;
            }
        };
        // Keep draining the child's stdout so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        let stdin = process.stdin.take();
        ChildNode {
            process,
            addr,
            stdin,
        }
    }

    /// Close its stdin: the child leaves the cluster and exits; wait for that.
    pub(crate) fn stop(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.process.wait().unwrap()
    }

    /// SIGKILL it (no goodbye to anyone).
    pub(crate) fn kill(&mut self) {
        self.process.kill().unwrap();
        let _ = self.process.wait();
    }
}

impl Drop for ChildNode {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The child's main: a team with the spec's agents on a node; `READY ADDR` on stdout; runs
/// until stdin closes. Selected only by [`ChildNode::start`].
#[test]
#[ignore = "a child process of the cluster tests, started by them"]
fn cluster_child_node() {
    let spec: ChildSpec = serde_json::from_str(&std::env::var(CHILD_ENV).unwrap()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let agents: Vec<&str> = spec.agents.iter().map(String::as_str).collect();
        let (team, node) = super::node(&spec.name, &agents, spec.config()).await;
        // On a line of its own: libtest has written "test … ..." without a newline.
        println!("\nREADY {}", node.listen_addr());
        std::io::stdout().flush().unwrap();
        tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin()
                .read_line(&mut sink)
                .map(|n| n > 0)
                .unwrap_or(false)
            {
                sink.clear();
            }
        })
        .await
        .unwrap();
        node.shutdown().await;
        team.shutdown().await;
    });
}
