//! A remote `ask` round trip on loopback against a local `ask` and a raw TCP echo of the same
//! payload, measured in one run, interleaved. The remote node is this binary re-run as a child
//! process (it also serves the TCP echo, so both network rows cross the same two processes).
//!
//! ```text
//! cargo bench -p troupe-cluster --bench remote_ask
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use troupe_cluster::{ClusterNode, NodeConfig};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint, Team,
    TeamConfig,
};

const CHILD_ENV: &str = "TROUPE_REMOTE_ASK_BENCH_CHILD";
/// As `openssl rand -hex 32` makes them: a node refuses a weak cookie.
const COOKIE: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const ROUNDS: usize = 15;
const PER_ROUND: usize = 200;

struct Echo;

#[async_trait]
impl AgentBehavior for Echo {
    async fn handle(&mut self, r: AgentRequest, _: &AgentContext) -> Result<String, AgentError> {
        Ok(r.text)
    }
    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }
}

fn echo() -> BehaviorFactory {
    Arc::new(|_| Ok(Box::new(Echo) as Box<dyn AgentBehavior>))
}

/// The child: a node with `remote_echo`, a TCP echo server, both addresses on stdout.
async fn child() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("remote_echo", echo()).await.unwrap();
    let node = ClusterNode::start(&team, NodeConfig::new("far", COOKIE))
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            socket.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let Ok(len) = socket.read_u32().await else {
                        return;
                    };
                    let len = len as usize;
                    if socket.read_exact(&mut buf[..len]).await.is_err() {
                        return;
                    }
                    if socket.write_u32(len as u32).await.is_err()
                        || socket.write_all(&buf[..len]).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    println!("READY {} {tcp}", node.listen_addr());
    std::io::stdout().flush().unwrap();
    tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()))
        .await
        .unwrap()
        .unwrap();
    node.shutdown().await;
    team.shutdown().await;
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if std::env::var_os(CHILD_ENV).is_some() {
        runtime.block_on(child());
        return;
    }
    let mut process = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
    let (node_addr, tcp_addr): (SocketAddr, SocketAddr) = loop {
        let line = lines.next().expect("child exited").unwrap();
        if let Some(rest) = line.strip_prefix("READY ") {
            let mut parts = rest.split_whitespace();
            break (
                parts.next().unwrap().parse().unwrap(),
                parts.next().unwrap().parse().unwrap(),
            );
        }
    };
    let payload = "x".repeat(200);
    runtime.block_on(async {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        team.spawn("local_echo", echo()).await.unwrap();
        let node = ClusterNode::start(&team, NodeConfig::new("near", COOKIE))
            .await
            .unwrap();
        node.connect(node_addr).await.unwrap();
        let mut tcp = tokio::net::TcpStream::connect(tcp_addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let mut buf = vec![0u8; payload.len()];

        let (mut local, mut remote, mut raw) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..=ROUNDS {
            for _ in 0..PER_ROUND {
                let t = Instant::now();
                let a = team.ask("local_echo", payload.clone()).await.unwrap();
                let local_t = t.elapsed();
                let t = Instant::now();
                let b = team.ask("remote_echo", payload.clone()).await.unwrap();
                let remote_t = t.elapsed();
                let t = Instant::now();
                tcp.write_u32(payload.len() as u32).await.unwrap();
                tcp.write_all(payload.as_bytes()).await.unwrap();
                let len = tcp.read_u32().await.unwrap() as usize;
                tcp.read_exact(&mut buf[..len]).await.unwrap();
                let raw_t = t.elapsed();
                assert_eq!((a.len(), b.len(), len), (200, 200, 200));
                // Round 0 warms up.
                if round > 0 {
                    local.push(local_t);
                    remote.push(remote_t);
                    raw.push(raw_t);
                }
            }
        }
        let (local, remote, raw) = (median(local), median(remote), median(raw));
        println!(
            "load average: {}",
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
        println!(
            "{} round trips each, 200-byte payload, medians:",
            ROUNDS * PER_ROUND
        );
        println!(
            "  local ask          {:>10.1} µs",
            local.as_secs_f64() * 1e6
        );
        println!(
            "  remote ask         {:>10.1} µs",
            remote.as_secs_f64() * 1e6
        );
        println!("  raw TCP echo       {:>10.1} µs", raw.as_secs_f64() * 1e6);
        println!(
            "  remote / raw TCP   {:>10.2}×   remote / local {:.1}×",
            remote.as_secs_f64() / raw.as_secs_f64(),
            remote.as_secs_f64() / local.as_secs_f64()
        );
        node.shutdown().await;
        team.shutdown().await;
    });
    drop(process.stdin.take());
    let _ = process.wait();
}
