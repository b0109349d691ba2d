//! What a caller's messages cost `troupe a2a serve` (#52), through the real binary: replies to
//! a task paused by a budget are not piled into it and sent back whole each time, and streaming
//! an answer costs the server CPU in proportion to its deltas, not to their square.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;

use serde_json::{Value, json};

use super::support::a2a_process::{A2aProcess, message};
use super::support::chat::completions_server;
use super::support::chat_server::read_request;

/// A config whose `assistant`, at the model `url`, has an agent budget of `budget` TOML and a
/// window of `window` tokens.
fn config(dir: &std::path::Path, url: &str, budget: &str, window: u32) -> std::path::PathBuf {
    let config = dir.join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[models.remote]
provider = "openai"
base_url = "{url}"
api_key_env = "TEST_CHAT_KEY"
model = "test-model"
context_window = {window}

[agents.assistant]
model = "remote"
instructions = "Be brief."
{budget}
"#
        ),
    )
    .unwrap();
    config
}

#[test]
fn replies_to_a_paused_task_are_not_piled_up_and_sent_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    // Every answer spends 2 output tokens: a context's agent is paused at its second request.
    let (url, _) = completions_server(|_, n| {
        (
            json!({"role": "assistant", "content": format!("done {n}")}),
            "stop",
        )
    });
    let config = config(
        dir.path(),
        &url,
        r#"budget = { agent = { output_tokens = 2 }, on_exceeded = "pause" }"#,
        8000,
    );
    let server = A2aProcess::start(&config, &[], &[]);
    let first = server.rpc("assistant", "SendMessage", message("hi", Some("c"), None));
    assert_eq!(
        first["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{first}"
    );
    let paused = server.rpc(
        "assistant",
        "SendMessage",
        message("again", Some("c"), None),
    );
    let task = &paused["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{paused}"
    );
    let id = task["id"].as_str().unwrap().to_string();
    let history = |server: &A2aProcess| {
        let got = server.rpc("assistant", "GetTask", json!({"id": id}));
        got["result"]["history"].as_array().map(Vec::len).unwrap()
    };
    let before = history(&server);
    let reply = "x".repeat(1 << 20);
    for n in 0..30 {
        let answer = server
            .request("POST", "/agents/assistant")
            .json(&json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage",
                "params": message(&reply, Some("c"), Some(&id))}))
            .send();
        assert_eq!(
            answer.status,
            200,
            "{}",
            &answer.body[..200.min(answer.body.len())]
        );
        // The caller is told the task still waits, without its own megabyte sent back.
        assert!(
            answer.body.len() < 64 << 10,
            "reply {n}: {} bytes back",
            answer.body.len()
        );
        let answer: Value = serde_json::from_str(&answer.body).unwrap();
        let task = &answer["result"]["task"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{answer}"
        );
        assert!(
            task["status"]["message"]
                .to_string()
                .contains("operator must raise it"),
            "{answer}"
        );
    }
    assert_eq!(
        history(&server),
        before,
        "the replies were kept in the task"
    );
}

/// An OpenAI-compatible server streaming each answer as `n` deltas of `size` bytes, `n` the
/// number in the last user message ("deltas N").
fn deltas_server(size: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Some(request) = read_request(&mut stream) else {
                continue;
            };
            let asked = request["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_string();
            let n: usize = asked
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            let piece = "y".repeat(size);
            let mut body = String::from(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
            );
            for _ in 0..n {
                let chunk = json!({"id": "c", "object": "chat.completion.chunk", "created": 0,
                    "model": "test-model",
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
                body.push_str(&format!("data: {chunk}\n\n"));
            }
            let last = json!({"id": "c", "object": "chat.completion.chunk", "created": 0,
                "model": "test-model",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}});
            body.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
            let _ = stream.write_all(body.as_bytes());
        }
    });
    url
}

/// The CPU time the process `pid` has used, in clock ticks (user + system).
fn cpu_ticks(pid: u32) -> u64 {
    let mut stat = String::new();
    std::fs::File::open(format!("/proc/{pid}/stat"))
        .unwrap()
        .read_to_string(&mut stat)
        .unwrap();
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn streaming_costs_the_server_in_proportion_to_the_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let url = deltas_server(128);
    // A window whose answer cap (32 bytes a token) holds the 4 MiB of 32,000 deltas.
    let config = config(dir.path(), &url, "", 200_000);
    let server = A2aProcess::start(&config, &[], &[]);
    let pid = server.child.id();
    let streamed = |deltas: usize| {
        let before = cpu_ticks(pid);
        let answer = server
            .request("POST", "/agents/assistant")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                "params": message(&format!("deltas {deltas}"), None, None)}),
            )
            .send();
        let tail = &answer.body[answer.body.len().saturating_sub(600)..];
        assert!(
            answer.body.contains("TASK_STATE_COMPLETED"),
            "{deltas} deltas: {} bytes streamed, ending {tail}",
            answer.body.len()
        );
        cpu_ticks(pid) - before
    };
    streamed(100);
    let (small, large) = (streamed(8_000), streamed(32_000));
    eprintln!("server CPU: 8,000 deltas {small} ticks, 32,000 deltas {large} ticks");
    // Four times the deltas: about four times the work when linear (16 times when each delta
    // copies what came before); 7 leaves room for a loaded machine's noise.
    assert!(
        large <= small.max(10) * 7,
        "4x the deltas cost {large} ticks against {small}: more than 7x"
    );
}
