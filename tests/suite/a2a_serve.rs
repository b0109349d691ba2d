//! `troupe a2a serve`: a config's agent served over A2A 1.0, its key from the environment, asked
//! by troupe's own A2A client.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use troupe_a2a::wire::{Message, Role, SendMessageRequest, SendMessageResponse, TaskState};
use troupe_a2a::{A2aClient, A2aError, A2aRemote};

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
