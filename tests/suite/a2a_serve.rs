//! `troupe a2a serve`: a config's agents served over A2A 1.0, their key from the environment,
//! asked by troupe's own A2A client and by the official SDK's (`a2a-sdk`, which `.ci/run`
//! installs and names in `TROUPE_A2A_PYTHON`; without it that test says it was skipped, except
//! under CI, where it fails).

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use troupe_a2a::wire::{Message, Role, SendMessageRequest, SendMessageResponse, TaskState};
use troupe_a2a::{A2aClient, A2aError, A2aRemote};

use super::support::a2a_process::A2aProcess;
use super::support::chat::{completions_server, write_config};

/// Kills the server when the test ends, passing or not.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a2a_serve_serves_a_config_agent_behind_the_key_from_the_environment() {
    let (url, requests) = completions_server(|_, n| {
        (
            serde_json::json!({"role": "assistant", "content": format!("done {n}")}),
            "stop",
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url);
    let key = "a2a-key-never-printed";
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "a2a",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--key-env",
            "TEST_A2A_KEY",
            "--config",
        ])
        .arg(&config)
        .env("TEST_CHAT_KEY", "sk-test")
        .env("TEST_A2A_KEY", key)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let served = Served(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("READY ")
        .unwrap_or_else(|| panic!("{line:?}"));
    let base = format!("http://{addr}/agents/assistant");

    // The card asks for a key: without one the client says so before sending anything.
    let err = A2aClient::connect(&A2aRemote::new(&base))
        .await
        .unwrap_err();
    assert!(matches!(err, A2aError::Auth(_)), "{err}");

    troupe::host::credentials::keep("TEST_A2A_CALLER_KEY", key);
    let client = A2aClient::connect(&A2aRemote::new(&base).key_env("TEST_A2A_CALLER_KEY"))
        .await
        .unwrap();
    assert_eq!(client.card().name, "assistant");
    assert!(client.card().description.contains("Be brief."));
    let request = SendMessageRequest {
        message: Message::text(Role::User, "hello"),
        configuration: None,
    };
    let SendMessageResponse::Task(task) = client.send(&request, None).await.unwrap() else {
        panic!("not a task");
    };
    assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
    assert_eq!(task.artifacts[0].parts[0].text.as_deref(), Some("done 1"));
    assert_eq!(requests.lock().unwrap().len(), 1);
    drop(served);
    let mut logged = String::new();
    std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut logged).unwrap();
    assert!(logged.contains(&base), "{logged}");
    assert!(!logged.contains(key), "{logged}");
}

/// An OpenAI-compatible address that accepts connections and never answers: a request to its
/// model runs until cancelled.
fn silent_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    url
}

/// The SDK's Python: the one helper troupe-a2a's suite uses too.
#[path = "../../crates/a2a/tests/suite/sdk_python.rs"]
mod sdk_python;
use sdk_python::sdk_python;

#[test]
fn the_a2a_sdks_client_drives_troupe_a2a_serve() {
    let Some(python) = sdk_python() else { return };
    let (url, _) = completions_server(|_, n| {
        (
            serde_json::json!({"role": "assistant", "content": format!("done {n}")}),
            "stop",
        )
    });
    let silent = silent_server();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[models.remote]
provider = "openai"
base_url = "{url}"
api_key_env = "TEST_CHAT_KEY"
model = "test-model"
context_window = 8000

[models.silent]
provider = "openai"
base_url = "{silent}"
api_key_env = "TEST_CHAT_KEY"
model = "test-model"
context_window = 8000

[agents.assistant]
model = "remote"
instructions = "Be brief."

[agents.sleeper]
model = "silent"
"#
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "a2a",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--key-env",
            "TEST_A2A_KEY",
            "--config",
        ])
        .arg(&config)
        .env("TEST_CHAT_KEY", "sk-test")
        .env("TEST_A2A_KEY", "sdk-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _served = Served(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("READY ")
        .unwrap_or_else(|| panic!("{line:?}"));
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/a2a/tests/sdk_client.py"
    );
    let out = Command::new(python)
        .arg(script)
        .arg(format!("http://{addr}/agents/assistant"))
        .arg(format!("http://{addr}/agents/sleeper"))
        .env("A2A_TEST_KEY", "sdk-key")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let expected = [
        "CARD name=assistant streaming=True",
        "SEND state=TASK_STATE_COMPLETED text=done ",
        "GET state=TASK_STATE_COMPLETED history=2",
        "LIST total=1",
        "STREAM first=task last_state=TASK_STATE_COMPLETED text=done ",
        "CANCEL state=TASK_STATE_CANCELED",
        "CANCELLED state=TASK_STATE_CANCELED",
    ];
    assert_eq!(lines.len(), expected.len(), "{stdout}\n{stderr}");
    for (line, start) in lines.iter().zip(expected) {
        assert!(
            line.starts_with(start),
            "{line:?} is not {start:?}…\n{stdout}"
        );
    }
}

/// `troupe a2a serve` with `args` on a config whose `assistant` answers `done N`: the server
/// (with the key it made, kept as the credential `TEST_A2A_MADE_KEY`).
fn serve_with(dir: &std::path::Path, args: &[&str]) -> A2aProcess {
    let (url, _) = completions_server(|_, n| {
        (
            serde_json::json!({"role": "assistant", "content": format!("done {n}")}),
            "stop",
        )
    });
    let config = write_config(dir, &url);
    let served = A2aProcess::start(&config, args, &[]);
    let key = served.key.clone().expect("a key made and printed");
    troupe::host::credentials::keep("TEST_A2A_MADE_KEY", key);
    served
}

#[test]
fn a2a_serve_refuses_zero_or_absurd_conversation_bounds_and_documents_them() {
    let help = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["a2a", "serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--max-contexts",
        "--context-idle",
        "--max-context-logs",
        "--max-context-log-bytes",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    for (flag, value) in [
        ("--max-contexts", "0"),
        ("--max-contexts", "10000000"),
        ("--context-idle", "0"),
        ("--context-idle", "99999999999"),
        ("--max-context-logs", "0"),
        ("--max-context-log-bytes", "0"),
        ("--max-context-log-bytes", "999999999999999"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args(["a2a", "serve", flag, value])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} {value} was taken");
        assert!(
            said.contains(flag) && said.contains(value) && said.contains("is not in"),
            "{flag} {value}: {said}"
        );
    }
}

#[tokio::test]
async fn a2a_serve_max_contexts_lets_an_idle_conversation_go_for_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve_with(
        dir.path(),
        &[
            "--max-contexts",
            "1",
            "--context-idle",
            "600",
            "--max-context-logs",
            "10",
            "--max-context-log-bytes",
            "1048576",
        ],
    );
    let client = A2aClient::connect(
        &A2aRemote::new(format!("http://{}/agents/assistant", served.addr))
            .key_env("TEST_A2A_MADE_KEY"),
    )
    .await
    .unwrap();
    let in_context = |context: &str| SendMessageRequest {
        message: Message {
            context_id: Some(context.to_string()),
            ..Message::text(Role::User, "hello")
        },
        configuration: None,
    };
    for context in ["a", "b"] {
        let SendMessageResponse::Task(task) =
            client.send(&in_context(context), None).await.unwrap()
        else {
            panic!("not a task");
        };
        assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
    }
    // One conversation at once: `a` was let go for `b`, and (no session log) it has ended.
    let err = client.send(&in_context("a"), None).await.unwrap_err();
    assert!(
        matches!(&err, A2aError::Rpc { code: -32602, message } if message.contains("context `a` has ended")),
        "{err}"
    );
}
