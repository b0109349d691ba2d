//! troupe's own credentials stay out of the reach of the processes it runs, the model provider
//! still gets its key, and a key that was asked for but is missing stops the command.

use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::support::chat_server::read_request_authorized;

/// The key `troupe chat` is started with.
const KEY: &str = "sk-test-childenv-0123456789SECRET";

/// What the shell tool is asked to run: troupe's environment as `/proc` shows it, and the
/// command's own.
const SPY: &str = "tr '\\0' '\\n' < /proc/$PPID/environ; echo '--- own'; env";

/// An OpenAI-compatible server whose first answer asks for the shell tool to run [`SPY`] and
/// whose later answers are plain text; it keeps every request. Returns its `/v1` URL.
fn start_server(requests: Arc<Mutex<Vec<(String, Value)>>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Some(request) = read_request_authorized(&mut stream) else {
                continue;
            };
            let n = {
                let mut requests = requests.lock().unwrap();
                requests.push(request);
                requests.len()
            };
            let message = if n == 1 {
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "shell", "arguments": json!({"command": SPY}).to_string()}
                }]})
            } else {
                json!({"role": "assistant", "content": "done"})
            };
            let finish = if n == 1 { "tool_calls" } else { "stop" };
            let body = json!({
                "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
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

/// `troupe chat` with `OPENAI_API_KEY` set and a shell tool: a command reading troupe's
/// `/proc/$PPID/environ` (and its own environment) finds no key, while the provider gets it.
#[test]
fn the_shell_tool_cannot_read_troupes_keys_and_the_provider_still_gets_them() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let url = start_server(requests.clone());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            "[models.remote]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\ncontext_window = 8000\n\n[agents.assistant]\nmodel = \"remote\"\ntools = [\"shell\"]\n\n[tools]\nshell_env = [\"TROUPE_TEST_PASSED_TOKEN\"]\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["chat", "--config"])
        .arg(&config)
        .arg("--session")
        .arg(dir.path().join("s.jsonl"))
        .current_dir(dir.path())
        .env("OPENAI_API_KEY", KEY)
        .env("TROUPE_TEST_GITHUB_TOKEN", "ghp_childenvSECRET")
        .env("TROUPE_TEST_MARKER", "visible")
        .env("TROUPE_TEST_PASSED_TOKEN", "passed-on-purpose")
        .env_remove("TROUPE_TRACE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"look around\n/exit\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let requests = requests.lock().unwrap();
    assert!(requests.len() >= 2, "the tool never ran: {stderr}");
    // The provider got the key with every request.
    for (authorization, _) in requests.iter() {
        assert_eq!(authorization, &format!("Bearer {KEY}"));
    }
    // The tool result the model got back: what the command saw.
    let seen = requests[1]
        .1
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|messages| messages.iter().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(seen.contains("--- own"), "the command did not run: {seen}");
    // The environment block was readable (troupe's other variables are in it) or refused;
    // either way no credential is in it, nor in the command's own environment.
    assert!(
        !seen.contains("childenv"),
        "a key reached the shell tool:\n{seen}"
    );
    // A credential the config passes to the shell on purpose still reaches it, and only it.
    let (environ, own) = seen.split_once("--- own").unwrap_or_default();
    assert!(
        own.contains("TROUPE_TEST_PASSED_TOKEN=passed-on-purpose"),
        "{seen}"
    );
    assert!(!environ.contains("passed-on-purpose"), "{seen}");
    if !seen.contains("Permission denied") {
        assert!(seen.contains("TROUPE_TEST_MARKER=visible"), "{seen}");
    }
}

/// `api_key_env` naming a variable that is not set stops the command with a message naming it,
/// instead of sending requests without the key.
#[test]
fn an_api_key_env_naming_an_unset_variable_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        "[models.remote]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"TROUPE_TEST_UNSET_KEY\"\nmodel = \"m\"\n\n[agents.assistant]\nmodel = \"remote\"\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["chat", "--config"])
        .arg(&config)
        .arg("--session")
        .arg(dir.path().join("s.jsonl"))
        .env_remove("TROUPE_TEST_UNSET_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("$TROUPE_TEST_UNSET_KEY"), "{stderr}");
    assert!(stderr.contains("not set"), "{stderr}");
}
