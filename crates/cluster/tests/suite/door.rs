//! The front door under attack: idle connections, running out of descriptors.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Instant;
use troupe_cluster::HANDSHAKE_TIMEOUT;

use super::support::child::{ChildNode, ChildSpec};
use super::support::plain_node;

/// 300 connections that never say a word (from 127.0.0.2: another source than the real peer)
/// neither keep the node from taking a real peer nor stay open past the handshake timeout.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn idle_connections_are_closed_and_do_not_lock_a_real_peer_out() {
    let child = ChildNode::start(&ChildSpec::new("b16", &["worker16"]));
    let mut idle = Vec::new();
    for _ in 0..300 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        idle.push(socket.connect(child.addr).await.unwrap());
    }
    let (team, node) = plain_node("a16", &[]).await;
    assert_eq!(node.connect(child.addr).await.unwrap(), "b16");
    assert_eq!(team.ask("worker16", "hi").await.unwrap(), "hi@b16");

    let deadline = Instant::now() + HANDSHAKE_TIMEOUT + Duration::from_secs(10);
    for (i, mut stream) in idle.into_iter().enumerate() {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout_at(deadline, stream.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "idle connection {i} is still open: {read:?}"
        );
    }
    // The real peer's session is untouched. (Not asked again: process groups are keyed by
    // actor ids, which repeat across this process's nodes, so other tests' nodes leaving can
    // drop this one's names meanwhile.)
    assert_eq!(node.peers(), vec!["b16".to_string()]);
    node.shutdown().await;
    team.shutdown().await;
}

/// Out of file descriptors, every accept fails (EMFILE): the node backs off and logs a few
/// lines, not a line per retry, and takes connections again once descriptors are free.
#[cfg(unix)]
#[tokio::test]
async fn a_node_out_of_descriptors_backs_off_quietly_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("node.log");
    let mut spec = ChildSpec::new("b17", &["worker17"]);
    spec.fd_limit = Some(256);
    spec.exhaust_fds = true;
    spec.log_file = Some(log.clone());
    let mut child = ChildNode::start(&spec);
    // They wait in the listen backlog while the node cannot accept them.
    let mut waiting = Vec::new();
    for _ in 0..3 {
        waiting.push(tokio::net::TcpStream::connect(child.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let text = std::fs::read_to_string(&log).unwrap();
    let lines = text.lines().filter(|l| l.contains("accept")).count();
    assert!(lines >= 1, "the accept failures were not logged:\n{text}");
    assert!(lines <= 12, "{lines} lines about accept failures in 3 s");

    child.send("release");
    drop(waiting);
    let (team, node) = plain_node("a17", &[]).await;
    assert_eq!(node.connect(child.addr).await.unwrap(), "b17");
    assert_eq!(team.ask("worker17", "hi").await.unwrap(), "hi@b17");
    node.shutdown().await;
    team.shutdown().await;
}
