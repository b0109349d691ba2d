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
    /// Run under this open-files limit (`ulimit -n`).
    pub(crate) fd_limit: Option<u32>,
    /// Once listening, open files until none is left (and close them on a `release` line).
    pub(crate) exhaust_fds: bool,
    /// Write the node's log (warnings and up) to this file.
    pub(crate) log_file: Option<PathBuf>,
}

impl ChildSpec {
    pub(crate) fn new(name: &str, agents: &[&str]) -> Self {
        ChildSpec {
            name: name.into(),
            cookie: super::COOKIE.into(),
            agents: agents.iter().map(|a| a.to_string()).collect(),
            tls: None,
            fd_limit: None,
            exhaust_fds: false,
            log_file: None,
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
        let exe = std::env::current_exe().unwrap();
        let mut command = match spec.fd_limit {
            None => Command::new(exe),
            Some(limit) => {
                let mut sh = Command::new("sh");
                sh.args(["-c", &format!("ulimit -n {limit} && exec \"$0\" \"$@\"")])
                    .arg(exe);
                sh
            }
        };
        let mut process = command
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

    /// Write a line to its stdin (`release`: close the files `exhaust_fds` opened).
    pub(crate) fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Send it a signal (`STOP`, `CONT`) with kill(1).
    pub(crate) fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.process.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{signal} failed");
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
    if let Some(path) = &spec.log_file {
        let file = std::fs::File::create(path).unwrap();
        tracing::subscriber::set_global_default(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::WARN)
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .finish(),
        )
        .unwrap();
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let agents: Vec<&str> = spec.agents.iter().map(String::as_str).collect();
        let (team, node) = super::node(&spec.name, &agents, spec.config()).await;
        // Every descriptor taken: accepting a connection fails (EMFILE) until `release`.
        let mut hoard = Vec::new();
        if spec.exhaust_fds {
            while let Ok(file) = std::fs::File::open("/dev/null") {
                hoard.push(file);
            }
        }
        // On a line of its own: libtest has written "test … ..." without a newline.
        println!("\nREADY {}", node.listen_addr());
        std::io::stdout().flush().unwrap();
        tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            while std::io::stdin()
                .read_line(&mut line)
                .map(|n| n > 0)
                .unwrap_or(false)
            {
                if line.trim() == "release" {
                    hoard.clear();
                }
                line.clear();
            }
        })
        .await
        .unwrap();
        node.shutdown().await;
        team.shutdown().await;
    });
}
