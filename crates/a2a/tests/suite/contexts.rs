//! One conversation per A2A context: two callers of one served agent never see each other's
//! messages, a context's conversation outlives a server restart through its session log, and
//! the cap on live conversations lets idle ones go and refuses when every one is working.

use std::sync::Arc;

use futures::StreamExt as _;
use serde_json::{Value, json};
use troupe_a2a::{A2aServeConfig, ServedAgent, serve};
use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::{AgentSpec, TeamBuilderExt as _, shared_counter};
use troupe_models::ScriptedModel;
use troupe_runtime::{Team, TeamConfig};

use super::support::{KEY, Stuck, auth, http, rpc};

async fn team_of(spec: AgentSpec) -> Team {
    Team::builder()
        .config(TeamConfig::default())
        .compression(CompressionConfig {
            model: CompressorModel::None,
            ..CompressionConfig::new(shared_counter())
        })
        .agent(spec)
        .start()
        .await
        .unwrap()
}

fn config(name: &str) -> A2aServeConfig {
    A2aServeConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![ServedAgent::new(name, "helps")],
        auth(),
    )
}

/// A user message of `text` in context `context`.
fn in_context(context: &str, text: &str) -> Value {
    json!({"messageId": format!("m-{context}-{text}"), "role": "ROLE_USER",
        "contextId": context, "parts": [{"text": text}]})
}

/// What the model was sent in the request whose last message is `text`: every message's text.
fn sent_with(model: &ScriptedModel, text: &str) -> Vec<String> {
    model
        .requests()
        .into_iter()
        .find(|r| r.messages.last().is_some_and(|m| m.text() == text))
        .unwrap_or_else(|| panic!("no request ended with {text:?}"))
        .messages
        .iter()
        .map(|m| m.text())
        .collect()
}

async fn send(url: &str, context: &str, text: &str) -> Value {
    let (status, answer) = rpc(
        url,
        "SendMessage",
        json!({"message": in_context(context, text)}),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    answer
}

fn state(answer: &Value) -> &str {
    answer["result"]["task"]["status"]["state"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {answer}"))
}

#[tokio::test]
async fn two_contexts_of_one_served_agent_do_not_see_each_others_messages() {
    let model = Arc::new(ScriptedModel::new("scripted", []).with_fallback("noted"));
    let team = team_of(AgentSpec::new("helper", model.clone()).instructions("Help.")).await;
    let server = serve(&team, config("helper")).await.unwrap();
    let url = server.agent_url("helper");

    let told = send(&url, "alice", "my secret is 1234").await;
    assert_eq!(state(&told), "TASK_STATE_COMPLETED", "{told}");
    let asked = send(&url, "bob", "what is the secret?").await;
    assert_eq!(state(&asked), "TASK_STATE_COMPLETED", "{asked}");
    let bob_saw = sent_with(&model, "what is the secret?");
    assert!(
        !bob_saw.iter().any(|m| m.contains("1234")),
        "another context's message reached the model: {bob_saw:?}"
    );
    assert_eq!(bob_saw, ["Help.", "what is the secret?"]);
    // Each context keeps its own conversation.
    send(&url, "alice", "and again?").await;
    let alice_saw = sent_with(&model, "and again?");
    assert!(
        alice_saw.iter().any(|m| m == "my secret is 1234"),
        "{alice_saw:?}"
    );
    assert!(
        !alice_saw.iter().any(|m| m.contains("secret?")),
        "{alice_saw:?}"
    );
    // The served agent itself was asked nothing.
    assert!(team.checkpoint("helper").unwrap().conversation.is_empty());
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_restarted_server_continues_a_contexts_conversation_from_its_session_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("helper.jsonl");
    let spec = |model: Arc<ScriptedModel>| AgentSpec::new("helper", model).session(&log);

    let before = Arc::new(ScriptedModel::new("scripted", []).with_fallback("noted"));
    let team = team_of(spec(before.clone())).await;
    let server = serve(&team, config("helper")).await.unwrap();
    send(&server.agent_url("helper"), "c1", "my colour is blue").await;
    server.shutdown().await;
    team.shutdown().await;

    let after = Arc::new(ScriptedModel::new("scripted", []).with_fallback("blue"));
    let team = team_of(spec(after.clone())).await;
    let server = serve(&team, config("helper")).await.unwrap();
    let url = server.agent_url("helper");
    let answer = send(&url, "c1", "what is my colour?").await;
    assert_eq!(state(&answer), "TASK_STATE_COMPLETED", "{answer}");
    let resumed = sent_with(&after, "what is my colour?");
    assert!(
        resumed.iter().any(|m| m == "my colour is blue"),
        "{resumed:?}"
    );
    // Another context starts afresh, and the served agent's own log holds neither.
    send(&url, "c2", "hello").await;
    assert_eq!(sent_with(&after, "hello"), ["hello"]);
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("blue")
    );
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn past_the_cap_an_idle_conversation_is_let_go_and_a_working_one_refuses_a_new_context() {
    // Idle ones go, least recently used first; without a log, a let-go context has ended.
    let model = Arc::new(ScriptedModel::new("scripted", []).with_fallback("ok"));
    let team = team_of(AgentSpec::new("helper", model.clone())).await;
    let mut one = config("helper");
    one.max_contexts = 1;
    let server = serve(&team, one.clone()).await.unwrap();
    let url = server.agent_url("helper");
    assert_eq!(
        state(&send(&url, "a", "first").await),
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(
        state(&send(&url, "b", "second").await),
        "TASK_STATE_COMPLETED"
    );
    let ended = send(&url, "a", "back again").await;
    assert_eq!(ended["error"]["code"], -32602, "{ended}");
    let why = ended["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("context `a` has ended") && why.contains("without a contextId"),
        "{why}"
    );
    // One agent per live context, the served one besides: the let-go one is gone from the team.
    let helpers = team.directory().names();
    assert_eq!(
        helpers
            .iter()
            .filter(|n| n.starts_with("helper.a2a-"))
            .count(),
        1,
        "{helpers:?}"
    );
    server.shutdown().await;
    team.shutdown().await;

    // A working conversation is never let go: a new context is refused while it works.
    let team = team_of(AgentSpec::new("sleeper", Arc::new(Stuck))).await;
    let mut one = config("sleeper");
    one.max_contexts = 1;
    let server = serve(&team, one).await.unwrap();
    let url = server.agent_url("sleeper");
    let response = http()
        .post(&url)
        .header("A2A-Version", "1.0")
        .bearer_auth(KEY)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": in_context("a", "sleep")}}),
        )
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let first = String::from_utf8(body.next().await.unwrap().unwrap().to_vec()).unwrap();
    let data: Value = serde_json::from_str(
        first
            .trim()
            .strip_prefix("data: ")
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let id = data["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(data["result"]["task"]["contextId"], "a", "{data}");
    let refused = send(&url, "b", "hello").await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 1 conversations at once and every one is working"),
        "{refused}"
    );
    // Once it is over, its agent is idle and makes room.
    let (_, cancelled) = rpc(&url, "CancelTask", json!({"id": id}), &[]).await;
    assert_eq!(
        cancelled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    drop(body);
    let response = http()
        .post(&url)
        .header("A2A-Version", "1.0")
        .bearer_auth(KEY)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": in_context("b", "sleep")}}),
        )
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let first = String::from_utf8(body.next().await.unwrap().unwrap().to_vec()).unwrap();
    let data: Value = serde_json::from_str(
        first
            .trim()
            .strip_prefix("data: ")
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(data["result"]["task"]["contextId"], "b", "{data}");
    let id = data["result"]["task"]["id"].as_str().unwrap().to_string();
    rpc(&url, "CancelTask", json!({"id": id}), &[]).await;
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_conversation_idle_past_its_limit_is_let_go_when_the_next_context_starts() {
    let model = Arc::new(ScriptedModel::new("scripted", []).with_fallback("ok"));
    let team = team_of(AgentSpec::new("helper", model)).await;
    let mut config = config("helper");
    // Idle at all is idle past the limit: no clock is waited on.
    config.context_idle = std::time::Duration::ZERO;
    let server = serve(&team, config).await.unwrap();
    let url = server.agent_url("helper");
    assert_eq!(
        state(&send(&url, "a", "first").await),
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(
        state(&send(&url, "b", "second").await),
        "TASK_STATE_COMPLETED"
    );
    let names = team.directory().names();
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("helper.a2a-"))
            .count(),
        1,
        "{names:?}"
    );
    // The context being asked is never let go under its own message.
    assert_eq!(
        state(&send(&url, "b", "still here?").await),
        "TASK_STATE_COMPLETED"
    );
    let ended = send(&url, "a", "back again").await;
    assert_eq!(ended["error"]["code"], -32602, "{ended}");
    server.shutdown().await;
    team.shutdown().await;
}

/// Where the context logs of `log`'s agent are kept for the tests' caller (`tester`, in hex).
fn logs_dir(log: &std::path::Path) -> std::path::PathBuf {
    log.with_file_name("helper.a2a").join("746573746572")
}

/// The context logs on disk beside `log` (file names, sorted).
fn context_logs(log: &std::path::Path) -> Vec<String> {
    let dir = logs_dir(log);
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".jsonl"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn a_caller_inventing_contexts_keeps_at_most_the_cap_of_logs_the_oldest_idle_removed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("helper.jsonl");
    let model = Arc::new(ScriptedModel::new("scripted", []).with_fallback("ok"));
    let team = team_of(AgentSpec::new("helper", model).session(&log)).await;
    let mut capped = config("helper");
    capped.max_context_logs = 2;
    capped.max_contexts = 1;
    let server = serve(&team, capped.clone()).await.unwrap();
    let url = server.agent_url("helper");
    for context in ["a", "b", "c", "d"] {
        let answer = send(&url, context, "hello").await;
        assert_eq!(state(&answer), "TASK_STATE_COMPLETED", "{answer}");
    }
    // "c" and "d" (hex 63, 64) are kept; "a" and "b" were removed, lock notes and all.
    assert_eq!(context_logs(&log), ["63.jsonl", "64.jsonl"]);
    let left: Vec<_> = std::fs::read_dir(logs_dir(&log))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("61") || n.starts_with("62"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A removed context has ended, and says why; a kept one goes on from its log.
    let ended = send(&url, "a", "back again").await;
    assert_eq!(ended["error"]["code"], -32602, "{ended}");
    let why = ended["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("context `a` has ended") && why.contains("at most 2"),
        "{why}"
    );
    let back = send(&url, "c", "still there?").await;
    assert_eq!(state(&back), "TASK_STATE_COMPLETED", "{back}");
    server.shutdown().await;
    team.shutdown().await;

    // A restarted server with a lower cap keeps only the newest logs.
    let model = Arc::new(ScriptedModel::new("scripted", []).with_fallback("ok"));
    let team = team_of(AgentSpec::new("helper", model).session(&log)).await;
    capped.max_context_logs = 1;
    let server = serve(&team, capped).await.unwrap();
    assert_eq!(context_logs(&log), ["63.jsonl"]);
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_contexts_log_past_its_byte_cap_takes_no_more_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("helper.jsonl");
    let model = Arc::new(ScriptedModel::new("scripted", []).with_fallback("ok"));
    let team = team_of(AgentSpec::new("helper", model).session(&log)).await;
    let mut capped = config("helper");
    capped.max_context_log_bytes = 1;
    let server = serve(&team, capped).await.unwrap();
    let url = server.agent_url("helper");
    let first = send(&url, "a", "hello").await;
    assert_eq!(state(&first), "TASK_STATE_COMPLETED", "{first}");
    let full = send(&url, "a", "more").await;
    assert_eq!(full["error"]["code"], -32602, "{full}");
    let why = full["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("context `a`") && why.contains("1-byte") && why.contains("another context"),
        "{why}"
    );
    // Another context is not held to the first one's size.
    let other = send(&url, "b", "hello").await;
    assert_eq!(state(&other), "TASK_STATE_COMPLETED", "{other}");
    server.shutdown().await;
    team.shutdown().await;
}

/// A behaviour troupe cannot build again per context: it answers with every text it was told.
struct Remembers(Vec<String>);

#[async_trait::async_trait]
impl troupe_runtime::AgentBehavior for Remembers {
    async fn handle(
        &mut self,
        request: troupe_runtime::AgentRequest,
        _ctx: &troupe_runtime::AgentContext,
    ) -> Result<String, troupe_runtime::AgentError> {
        self.0.push(request.text);
        Ok(self.0.join("|"))
    }

    fn checkpoint(&self) -> troupe_runtime::Checkpoint {
        troupe_runtime::Checkpoint::default()
    }
}

#[tokio::test]
async fn a_served_behaviour_that_is_not_an_llm_agent_keeps_one_context_and_refuses_another() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn(
        "memo",
        Arc::new(|_| Ok(Box::new(Remembers(Vec::new())) as Box<dyn troupe_runtime::AgentBehavior>)),
    )
    .await
    .unwrap();
    let server = serve(&team, config("memo")).await.unwrap();
    let url = server.agent_url("memo");
    let first = send(&url, "alice", "my secret is 1234").await;
    assert_eq!(state(&first), "TASK_STATE_COMPLETED", "{first}");
    // Another caller's context would share its one conversation: refused, the secret unseen.
    let other = send(&url, "bob", "what is the secret?").await;
    assert_eq!(other["error"]["code"], -32004, "{other}");
    let why = other["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("`memo`") && why.contains("one conversation") && !why.contains("alice"),
        "{why}"
    );
    assert!(!other.to_string().contains("1234"), "{other}");
    // So is a send without a contextId (a new conversation it cannot give).
    let (_, fresh) = rpc(
        &url,
        "SendMessage",
        json!({"message": {"messageId": "m-x", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
        &[],
    )
    .await;
    assert_eq!(fresh["error"]["code"], -32004, "{fresh}");
    // Its own context goes on.
    let again = send(&url, "alice", "again").await;
    assert_eq!(state(&again), "TASK_STATE_COMPLETED", "{again}");
    server.shutdown().await;
    team.shutdown().await;
}
