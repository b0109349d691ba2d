//! `TROUPE_TRACE=t.jsonl troupe compact …` goes through the compression agent and writes one
//! trace: the command's span, the compaction beneath it with its token counts, and beneath that
//! the compressor's `chat` calls and its tool calls. The model is an OpenAI-compatible server on
//! 127.0.0.1 that drives the compressor's tool loop the way a capable model would.

use std::io::Write;
use std::net::TcpListener;
use std::process::Command;

use serde_json::{Value, json};

use super::support::binary::s;
use super::support::chat_server::read_request;

const SUMMARY: &str = "## Goal\nShip the parser module.\n## Constraints & Preferences\n- keep the \
public API\n## Progress\n### Done\n- wrote the parser for module m1\n### In Progress\n- module \
m2\n### Blocked\n- none\n## Key Decisions\n- parse with a hand-written lexer\n## Next Steps\n1. \
finish module m2\n## Critical Context\n- tests live in tests/parser.rs";

/// Answers the compressor's tool loop with `get_compression_metadata`, then
/// `verify_compression_target`, then text; and every summary request with `SUMMARY`.
fn start_model_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut loop_calls = 0;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Some(request) = read_request(&mut stream) else {
                continue;
            };
            let has_tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
            let message = if has_tools {
                loop_calls += 1;
                let tool = match loop_calls {
                    1 => Some("get_compression_metadata"),
                    2 => Some("verify_compression_target"),
                    _ => None,
                };
                match tool {
                    Some(name) => json!({"role": "assistant", "content": null, "tool_calls": [{
                        "id": format!("call_{loop_calls}"), "type": "function",
                        "function": {"name": name, "arguments": "{}"}}]}),
                    None => json!({"role": "assistant", "content": "done"}),
                }
            } else {
                json!({"role": "assistant", "content": SUMMARY})
            };
            let finish = if message["tool_calls"].is_null() {
                "stop"
            } else {
                "tool_calls"
            };
            let body = json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                "model": "test-model",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
            })
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// A transcript well over a 2 000-token window: 40 exchanges about parser modules.
fn transcript() -> Value {
    let mut messages = vec![json!({"role": "system", "content": "You are a careful engineer."})];
    for i in 0..40 {
        messages.push(json!({"role": "user", "content": format!(
            "Module m{i}: please write the parser for this module, keep the public API, and \
             tell me what you changed and which tests cover it in detail."
        )}));
        messages.push(json!({"role": "assistant", "content": format!(
            "I wrote the parser for module m{i} with a hand-written lexer; the public API is \
             unchanged and tests/parser.rs covers the new cases for m{i}."
        )}));
    }
    Value::Array(messages)
}

#[test]
fn troupe_compact_is_one_trace_from_the_command_to_the_compressors_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("t.json");
    std::fs::write(&input, transcript().to_string()).unwrap();
    let (out, trace) = (dir.path().join("o.json"), dir.path().join("t.jsonl"));
    let url = start_model_server();
    let run = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "compact",
            s(&input),
            "--window",
            "2000",
            "--model",
            "openai",
        ])
        .args(["--out", s(&out)])
        .env("TROUPE_TRACE", &trace)
        .env("OPENAI_BASE_URL", &url)
        .env("OPENAI_API_KEY", "test-key")
        .env("OPENAI_MODEL", "test-model")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );

    let spans: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["span_id"].is_string())
        .collect();
    let by_name =
        |name: &str| -> Vec<&Value> { spans.iter().filter(|s| s["name"] == name).collect() };
    let traces: std::collections::BTreeSet<&str> = spans
        .iter()
        .map(|s| s["trace_id"].as_str().unwrap())
        .collect();
    assert_eq!(traces.len(), 1, "one trace, not {traces:?}");

    let command = by_name("compact_transcript");
    assert_eq!(command.len(), 1);
    assert!(
        command[0]["parent_span_id"].is_null(),
        "the command is the root"
    );
    let compaction = by_name("compaction");
    assert_eq!(compaction.len(), 1, "{spans:#?}");
    let compaction = compaction[0];
    assert_eq!(compaction["parent_span_id"], command[0]["span_id"]);
    let attrs = &compaction["attributes"];
    assert!(
        attrs["troupe.compaction.tokens_before"].as_u64().unwrap() > 2_000,
        "{attrs}"
    );
    assert!(
        attrs["troupe.compaction.tokens_after"].as_u64().unwrap()
            <= attrs["troupe.compaction.target"].as_u64().unwrap(),
        "{attrs}"
    );
    assert_eq!(attrs["troupe.trigger"], "manual");

    // Beneath the compaction: the compressor's model calls and its tool calls.
    let children = |name: &str| {
        by_name(name)
            .into_iter()
            .filter(|s| s["parent_span_id"] == compaction["span_id"])
            .collect::<Vec<_>>()
    };
    let tools: Vec<&str> = children("execute_tool")
        .iter()
        .map(|s| s["attributes"]["gen_ai.tool.name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"get_compression_metadata"), "{tools:?}");
    assert!(tools.contains(&"verify_compression_target"), "{tools:?}");
    let chats = children("chat");
    assert!(
        chats.len() >= 3,
        "tool loop and summary calls: {}",
        chats.len()
    );
    assert!(
        chats
            .iter()
            .all(|c| c["attributes"]["gen_ai.usage.input_tokens"] == 100),
        "{chats:#?}"
    );
}

#[test]
fn troupe_expand_writes_its_trace_too() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("t.json");
    std::fs::write(&input, transcript().to_string()).unwrap();
    let (out, archive) = (dir.path().join("o.json"), dir.path().join("a.jsonl"));
    let (restored, trace) = (dir.path().join("r.json"), dir.path().join("t.jsonl"));
    super::support::binary::ok(&[
        "compact",
        s(&input),
        "--window",
        "2000",
        "--model",
        "none",
        "--out",
        s(&out),
        "--archive",
        s(&archive),
    ]);
    let run = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "expand",
            s(&out),
            "--archive",
            s(&archive),
            "--out",
            s(&restored),
        ])
        .env("TROUPE_TRACE", &trace)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    let names: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|l| l["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(names, ["expand_transcript"], "{text}");
}
