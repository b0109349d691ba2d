//! Every listener troupe opens bounds what one client holds (#52): a request head sent in part
//! and then left, or a body that stops coming, is dropped after the server's timeout instead of
//! staying open for as long as the client likes. Driven against the real binary's two servers:
//! `troupe a2a serve` and the live view of `troupe chat --ui`, each with the configuration's
//! `[serve]` bounds set to 1 s: connections dropped well before the defaults (10 s for a head,
//! 15 s between a body's bytes) would have dropped them show the configured bounds are the ones
//! in force (and keep the test short).

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::support::a2a_process::A2aProcess;
use super::support::chat::{chat_command, write_config};
use super::support::chat_live::Live;

/// Eight times the configured bounds, below the defaults: a connection still open then was not
/// dropped by the configured bound.
const DEADLINE: Duration = Duration::from_secs(8);

/// The `[serve]` table the servers are started with.
const SERVE: &str = "\n[serve]\nhead_timeout_secs = 1\nbody_idle_timeout_secs = 1\n";

/// The test's configuration, with [`SERVE`].
fn config_with_bounds(dir: &std::path::Path) -> std::path::PathBuf {
    let config = write_config(dir, "http://127.0.0.1:9/v1");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(SERVE);
    std::fs::write(&config, text).unwrap();
    config
}

/// Open 30 connections to `addr`: 15 send half a request head, 15 a whole head (`post`, for
/// `path`, with `headers`) and the start of a body that never ends. All are dropped by the
/// server before [`DEADLINE`].
fn stalled_clients_are_dropped(addr: &str, path: &str, headers: &str) {
    let mut held = Vec::new();
    for n in 0..30 {
        let mut stream = TcpStream::connect(addr).unwrap();
        if n % 2 == 0 {
            write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nX-Half: ").unwrap();
        } else {
            write!(
                stream,
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}\
                 Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{\"jsonrpc\""
            )
            .unwrap();
        }
        stream.flush().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        held.push((n, stream));
    }
    let started = Instant::now();
    for (n, mut stream) in held {
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => answer.extend_from_slice(&buffer[..read]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    assert!(
                        started.elapsed() < DEADLINE,
                        "connection {n} to {addr} still open after {DEADLINE:?}: {:?}",
                        String::from_utf8_lossy(&answer)
                    );
                }
                // Reset by the server: dropped too.
                Err(_) => break,
            }
        }
    }
}

#[test]
fn troupe_a2a_serve_drops_half_sent_heads_and_stalled_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_bounds(dir.path());
    let server = A2aProcess::start(&config, &[], &[]);
    stalled_clients_are_dropped(&server.addr, "/agents/assistant", "A2A-Version: 1.0\r\n");
}

#[test]
fn the_live_view_of_troupe_chat_drops_half_sent_heads_and_stalled_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_bounds(dir.path());
    let mut chat = Live::start(
        chat_command(&config, &dir.path().join("chat.jsonl"))
            .arg("--ui")
            .spawn()
            .unwrap(),
    );
    chat.wait_for("live view: ");
    let url = chat.wait_for("\n").trim().to_string();
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, query) = rest.split_once('/').unwrap();
    let token = query.split("token=").nth(1).unwrap();
    stalled_clients_are_dropped(
        addr,
        "/api/approvals/deny",
        &format!("Origin: http://{addr}\r\nx-troupe-token: {token}\r\n"),
    );
    chat.send(b"/exit");
    let _ = chat.finish();
}
