//! One trace-file reader, one rule (#52, #54): `troupe trace` and `troupe ui --trace` read a
//! trace file through `troupe_protocol::trace`'s reader, so a line torn inside a UTF-8
//! character, or one that is not a record, is said, skipped or repaired, and counted by both —
//! never the end of the file for one of them and silence for the other.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::support::binary::{ok, s};
use super::support::live_view::{get, lines};

/// A closed span of agent `coder` as the trace file holds one.
fn span(name: &str, id: &str, start_ms: u64, end_ms: u64, attributes: serde_json::Value) -> String {
    serde_json::json!({
        "type": "span", "name": name, "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": id, "parent_span_id": null,
        "start_time_unix_nano": start_ms * 1_000_000, "end_time_unix_nano": end_ms * 1_000_000,
        "duration_ms": (end_ms - start_ms) as f64, "target": "troupe", "level": "INFO",
        "status": "ok", "attributes": attributes,
    })
    .to_string()
}

/// A trace of one request whose model call's line was torn inside a character (`é` cut to its
/// first byte), with a line that is no record after it.
fn torn_trace() -> Vec<u8> {
    let request = span(
        "invoke_agent",
        "0000000000000001",
        1000,
        1900,
        serde_json::json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"}),
    );
    let call = span(
        "chat",
        "0000000000000002",
        1100,
        1800,
        serde_json::json!({"gen_ai.operation.name": "chat", "gen_ai.agent.name": "coder",
                           "gen_ai.request.model": "caf\u{e9}-model"}),
    );
    let cut = call.find('\u{e9}').unwrap();
    let mut bytes = call.as_bytes()[..=cut].to_vec();
    bytes.extend_from_slice(&call.as_bytes()[cut + 2..]);
    [
        bytes,
        b"\nnot a record\n".to_vec(),
        request.into_bytes(),
        b"\n".to_vec(),
    ]
    .concat()
}

/// Stop `child` and return what it wrote on stderr.
fn stopped(mut child: Child) -> String {
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

#[test]
fn a_torn_character_and_a_bad_line_are_said_and_counted_by_the_tree_and_the_view_alike() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    std::fs::write(&path, torn_trace()).unwrap();

    let tree = ok(&["trace", s(&path)]);
    let said = format!("warning: {}:1: bytes that are not UTF-8", path.display());
    assert!(tree.contains(&said), "{tree}");
    let skipped = format!(
        "warning: {}:2: skipped, not a troupe trace line",
        path.display()
    );
    assert!(tree.contains(&skipped), "{tree}");
    assert!(tree.contains("agent coder"), "{tree}");
    assert!(tree.contains("caf\u{fffd}-model"), "{tree}");

    let mut view = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["ui", "--trace", s(&path)])
        .env_remove("TROUPE_TRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let printed = lines(view.stdout.take().unwrap());
    let url = loop {
        match printed.recv_timeout(Duration::from_secs(120)) {
            Ok(line) if line.ends_with("(read-only)") => {
                break line.trim_end_matches(" (read-only)").to_string();
            }
            Ok(_) => {}
            Err(_) => panic!("troupe ui --trace served nothing: {}", stopped(view)),
        }
    };
    let (base, query) = url.split_once('?').unwrap();
    let (_, body) = get(&format!("{base}api/snapshot?{query}"));
    let snapshot: serde_json::Value = serde_json::from_str(&body).unwrap();
    let err = stopped(view);
    assert!(err.contains(&said), "{err}");
    assert!(err.contains(&skipped), "{err}");
    assert_eq!(snapshot["agents"][0]["name"], "coder", "{snapshot}");
    assert_eq!(
        snapshot["agents"][0]["model"], "caf\u{fffd}-model",
        "{snapshot}"
    );
}
