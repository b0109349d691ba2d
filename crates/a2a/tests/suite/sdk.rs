//! The official A2A SDK (`a2a-sdk` on PyPI, pinned in .ci/run, A2A 1.0 JSON-RPC) in both roles:
//! its client drives troupe's server, and an agent written with its server is asked by a troupe
//! team. `TROUPE_A2A_PYTHON` names the Python that has it; without it the tests say they were
//! skipped, except under CI (`CI=true`), where they fail.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt as _;
use troupe_a2a::{
    A2aRemote, A2aServeConfig, INPUT_REQUIRED_PREFIX, ServedAgent, ServerAuth, join_team, serve,
};
use troupe_protocol::Event;
use troupe_runtime::AskItem;

use super::sdk_python::sdk_python;
use super::support::{empty_team, team_answering};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

/// The SDK agent (tests/sdk_agent.py), killed on drop.
struct SdkAgent {
    child: tokio::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl SdkAgent {
    async fn start(python: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("url");
        let child = tokio::process::Command::new(python)
            .arg(script("sdk_agent.py"))
            .arg(&port_file)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // Counted tries, not a clock: the agent writes the file once it accepts connections.
        for _ in 0..600 {
            if let Ok(url) = std::fs::read_to_string(&port_file) {
                return SdkAgent {
                    child,
                    url,
                    _dir: dir,
                };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the SDK agent did not start");
    }
}

impl Drop for SdkAgent {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

#[tokio::test]
async fn the_sdks_client_drives_troupes_server_card_send_stream_get_list_cancel() {
    let Some(python) = sdk_python() else { return };
    let team = team_answering("hello from troupe").await;
    let coder = ServedAgent::from_team(&team, "coder").await.unwrap();
    let config = A2aServeConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![coder, ServedAgent::new("sleeper", "never answers")],
        ServerAuth::bearer("sdk", "sdk-test-key"),
    );
    let server = serve(&team, config).await.unwrap();
    let output = tokio::process::Command::new(&python)
        .arg(script("sdk_client.py"))
        .arg(server.agent_url("coder"))
        .arg(server.agent_url("sleeper"))
        .env("A2A_TEST_KEY", "sdk-test-key")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "CARD name=coder streaming=True",
            "SEND state=TASK_STATE_COMPLETED text=hello from troupe",
            "GET state=TASK_STATE_COMPLETED history=2",
            "LIST total=1",
            "STREAM first=task last_state=TASK_STATE_COMPLETED text=hello from troupe",
            "CANCEL state=TASK_STATE_CANCELED",
            "CANCELLED state=TASK_STATE_CANCELED",
        ],
        "{stderr}"
    );
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn an_sdk_agent_is_a_teammate_streamed_asked_for_input_and_cancelled() {
    let Some(python) = sdk_python() else { return };
    let agent = SdkAgent::start(&python).await;
    let team = empty_team().await;
    let card = join_team(&team, "weather", &A2aRemote::new(agent.url.clone()))
        .await
        .unwrap();
    assert_eq!(card.name, "weather");

    // Streaming: its artifact chunks are the asker's deltas.
    let mut stream = team.ask_stream("weather", "hello");
    let mut deltas = Vec::new();
    let mut answer = None;
    while let Some(item) = stream.next().await {
        match item.unwrap() {
            AskItem::Event(Event::ModelDelta { agent, text }) if agent == "weather" => {
                deltas.push(text);
            }
            AskItem::Answer(text) => answer = Some(text),
            _ => {}
        }
    }
    assert_eq!(deltas, ["echo: ", "hello"]);
    assert_eq!(answer.as_deref(), Some("echo: hello"));

    // input-required: the question goes to the asker; the next ask answers the same task.
    let question = team.ask("weather", "ask me the city").await.unwrap();
    assert_eq!(question, format!("{INPUT_REQUIRED_PREFIX}Which city?"));
    assert_eq!(team.ask("weather", "Lyon").await.unwrap(), "sunny in Lyon");

    // Cancel: dropping the asker's stream cancels the SDK agent's endless task.
    let mut stream = team.ask_stream("weather", "slow please");
    let mut seen = 0;
    while let Some(item) = stream.next().await {
        if let Ok(AskItem::Event(Event::ModelDelta { .. })) = item {
            seen += 1;
            if seen == 3 {
                break;
            }
        }
    }
    drop(stream);
    let client = troupe_a2a::A2aClient::connect(&A2aRemote::new(agent.url.clone()))
        .await
        .unwrap();
    // The task's id, from the SDK's own store: the newest task of the conversation.
    let mut state = None;
    for _ in 0..200 {
        let tasks = list_tasks(&agent.url).await;
        if let Some(task) = tasks
            .iter()
            .find(|t| t["history"][0]["parts"][0]["text"] == "slow please")
        {
            let id = task["id"].as_str().unwrap();
            let task = client.get_task(id).await.unwrap();
            if task.status.state.is_terminal() {
                state = Some(task.status.state);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(state, Some(troupe_a2a::wire::TaskState::Canceled));
    team.shutdown().await;
}

async fn list_tasks(url: &str) -> Vec<serde_json::Value> {
    let (_, listed) = super::support::rpc(
        url,
        "ListTasks",
        serde_json::json!({"historyLength": 5}),
        &[],
    )
    .await;
    listed["result"]["tasks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}
