//! `TROUPE_CASSETTES` reaches every team the binary starts (#54): `troupe chat`, `troupe node`,
//! `troupe a2a serve` and the compressor of `troupe compact` start their teams through the
//! builder, so `record:DIR` writes each agent's model calls to `DIR/<agent>.jsonl` — and a chat
//! replays its answers from them with its server gone.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use troupe::cluster::{ClusterNode, NodeConfig};
use troupe::{AgentRequest, Team, TeamConfig};

use super::support::chat::{chat_command, completions_server, write_config};
use super::support::compact::Fixture;
use super::support::node_process::{COOKIE, one_node_at_a_time};

/// A server whose model answers every request with `done N`.
fn done_server() -> String {
    completions_server(|_, n| {
        (
            serde_json::json!({"role": "assistant", "content": format!("done {n}")}),
            "stop",
        )
    })
    .0
}

/// The recorded cassette of `agent` under `dir`, which must exist.
fn cassette(dir: &Path, agent: &str) -> String {
    let path = dir.join(format!("{agent}.jsonl"));
    let entries: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "no cassette {} ({e}); {dir:?} holds {entries:?}",
            path.display()
        )
    })
}

fn chat_with(config: &Path, session: &Path, cassettes: &str, input: &str) -> String {
    let mut child = chat_command(config, session)
        .env("TROUPE_CASSETTES", cassettes)
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn troupe_chat_records_to_cassettes_and_replays_with_its_server_gone() {
    let dir = tempfile::tempdir().unwrap();
    let tapes = dir.path().join("tapes");
    let config = write_config(dir.path(), &done_server());
    let recorded = format!("record:{}", tapes.display());
    let out = chat_with(
        &config,
        &dir.path().join("a.jsonl"),
        &recorded,
        "hello\n/exit\n",
    );
    assert!(out.contains("done 1"), "{out}");
    assert!(cassette(&tapes, "assistant").contains("done 1"));

    // The same conversation from a fresh session, with no server at all: served from the tape.
    let gone = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let replayed = format!("replay:{}", tapes.display());
    let out = chat_with(
        &gone,
        &dir.path().join("b.jsonl"),
        &replayed,
        "hello\n/exit\n",
    );
    assert!(out.contains("done 1"), "{out}");
}

#[test]
fn troupe_compact_records_its_compressors_model_calls() {
    let fixture = Fixture::new();
    let input = fixture.input("long.json", "tape");
    let tapes = fixture.path("tapes");
    let out = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("compact")
        .arg(&input)
        .args(["--window", "8000", "--model", "openai", "--out"])
        .arg(fixture.path("small.json"))
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", done_server())
        .env("OPENAI_MODEL", "test-model")
        .env("TROUPE_CASSETTES", format!("record:{}", tapes.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(cassette(&tapes, "compressor").contains("done 1"));
}

#[test]
fn troupe_node_records_its_agents_model_calls() {
    let _one = one_node_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let tapes = dir.path().join("tapes");
    let config = super::support::node_process::write_config(dir.path(), &done_server());
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "node",
            "--name",
            "remote",
            "--listen",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&config)
        .env("TROUPE_COOKIE", COOKIE)
        .env("TEST_NODE_KEY", "sk-test")
        .env("TROUPE_CASSETTES", format!("record:{}", tapes.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr: std::net::SocketAddr = loop {
        let line = lines.next().expect("troupe node exited early").unwrap();
        if let Some(addr) = line.strip_prefix("READY ") {
            break addr.trim().parse().unwrap();
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime.block_on(async {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        let node = ClusterNode::start(&team, NodeConfig::new("local", COOKIE))
            .await
            .unwrap();
        node.connect(addr).await.unwrap();
        let answer = team
            .ask_with(
                "helper",
                AgentRequest::from_user("hello"),
                Duration::from_secs(60),
            )
            .await;
        node.shutdown().await;
        team.shutdown().await;
        answer
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(answer.unwrap(), "done 1");
    assert!(cassette(&tapes, "helper").contains("done 1"));
}

#[tokio::test]
async fn troupe_a2a_serve_records_its_agents_model_calls() {
    use troupe::a2a::wire::{Message, Role, SendMessageRequest, SendMessageResponse};
    use troupe::a2a::{A2aClient, A2aRemote};

    let dir = tempfile::tempdir().unwrap();
    let tapes = dir.path().join("tapes");
    let config = write_config(dir.path(), &done_server());
    let key = "a2a-cassette-key";
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "a2a",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--key-env",
            "TEST_A2A_KEY",
        ])
        .arg("--config")
        .arg(&config)
        .env("TEST_CHAT_KEY", "sk-test")
        .env("TEST_A2A_KEY", key)
        .env("TROUPE_CASSETTES", format!("record:{}", tapes.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("READY ")
        .unwrap_or_else(|| panic!("{line:?}"));
    troupe::host::credentials::keep("TEST_A2A_CASSETTE_CALLER", key);
    let base = format!("http://{addr}/agents/assistant");
    let client = A2aClient::connect(&A2aRemote::new(&base).key_env("TEST_A2A_CASSETTE_CALLER"))
        .await
        .unwrap();
    let request = SendMessageRequest {
        message: Message::text(Role::User, "hello"),
        configuration: None,
    };
    let answered = client.send(&request, None).await;
    let _ = child.kill();
    let _ = child.wait();
    let SendMessageResponse::Task(task) = answered.unwrap() else {
        panic!("not a task");
    };
    assert_eq!(task.artifacts[0].parts[0].text.as_deref(), Some("done 1"));
    // A served LLM agent answers each context with an agent of its own, built from its spec:
    // its model carries the served agent's cassette.
    let recorded: Vec<_> = std::fs::read_dir(&tapes)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(
        recorded.iter().any(|tape| tape.contains("done 1")),
        "{recorded:?}"
    );
}
