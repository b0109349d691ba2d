//! `troupe chat` with a compaction working ahead (#30): the chat never waits for it, `/context`
//! shows it in flight, and a quiet notice says when it landed.

use std::sync::Arc;
use std::time::Duration;

use super::support::chat::{spawn_chat, write_config};
use super::support::chat_live::Live;
use super::support::chat_server::ChatServer;

/// Working ahead (the default), the chat never waits for the compaction: `/context` shows it
/// in flight while the compressor's model holds its answer, and a quiet notice says when it
/// landed.
#[test]
fn a_background_compaction_shows_in_context_and_is_told_once_it_lands() {
    let filler = "the quick brown fox jumps over the lazy dog ".repeat(100);
    // The compressor's tool loop is the only caller that offers its four tools: its calls are
    // held until the test releases them (at most 60 s), so the job stays in flight.
    let server = ChatServer::start_holding(
        Arc::new(move |n| format!("reply {n}: {filler}")),
        "get_compression_metadata",
        Duration::from_secs(60),
    );
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("context_window = 8000", "context_window = 30000"),
    )
    .unwrap();
    let session = dir.path().join("s.jsonl");
    let mut live = Live::start(spawn_chat(&config, &session));
    live.wait_for("> ");
    let mut turn = 0;
    while !server.seen("get_compression_metadata") {
        turn += 1;
        assert!(turn <= 40, "no background compaction: {}", live.pull());
        live.send(format!("turn {turn}").as_bytes());
        let printed = live.wait_for("> ");
        assert!(printed.contains(&format!("reply {turn}:")), "{printed}");
        assert!(
            !printed.contains("[compacting"),
            "the chat waited: {printed}"
        );
        // The job starts after the turn: give its first model call a moment to arrive.
        std::thread::sleep(Duration::from_millis(300));
    }
    live.send(b"/context");
    let printed = live.wait_for("> ");
    assert!(
        printed.contains("compacting in the background:"),
        "{printed}"
    );
    // Once the held call is answered the job finishes; a turn boundary after that takes it in.
    server.release_held();
    let mut told = String::new();
    for extra in 1..=40 {
        live.send(format!("after {extra}").as_bytes());
        told = live.wait_for("> ");
        if told.contains("[compacted in the background") {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(told.contains("[compacted in the background"), "{told}");
    assert!(!told.contains("[compacting"), "{told}");
    live.send(b"/context");
    let printed = live.wait_for("> ");
    assert!(printed.contains("last compaction:"), "{printed}");
    assert!(
        !printed.contains("compacting in the background:"),
        "{printed}"
    );
    live.send(b"/exit");
    let (_, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
}
