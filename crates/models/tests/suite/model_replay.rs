//! Recording a model's calls to JSONL and serving them back. A whole team run replayed, and the
//! compressor's calls on an agent's cassette: troupe-agents' `team_replay/`.

use async_trait::async_trait;
use futures::StreamExt as _;
use serde_json::json;
use troupe_models::{
    CASSETTE_VERSION, RecordingModel, ReplayError, ReplayModel, ScriptedModel, ScriptedReply,
};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ChatStream, FinishReason, ModelDelta, ModelError,
    ModelInfo, ToolChoice, ToolDefinition, Usage,
};

fn first_request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::system("Be brief.").into(),
            ChatMessage::user("Add 1 and 2.").into(),
        ],
        tools: vec![ToolDefinition {
            name: "add".into(),
            description: "Adds.".into(),
            parameters: json!({"type": "object", "properties": {"a": {"type": "number"}}}),
        }],
        tool_choice: ToolChoice::Auto,
        temperature: Some(0.0),
        max_tokens: None,
        ..ChatRequest::default()
    }
}

async fn record(path: &std::path::Path) -> Vec<Result<troupe_protocol::ChatResponse, ModelError>> {
    let scripted = ScriptedModel::new(
        "scripted",
        [
            ScriptedReply::call("add", r#"{"a": 1, "b": 2}"#),
            ScriptedReply::text("3"),
            ScriptedReply::Error(ModelError::ContextLengthExceeded("too long".into())),
        ],
    )
    .with_context_window(4096);
    let recorder = RecordingModel::create(scripted, path).unwrap();
    let mut request = first_request();
    let first = recorder.chat(request.clone()).await;
    let call = first.as_ref().unwrap().message.clone();
    let id = call.calls()[0].id.clone();
    request.messages.push(call.into());
    request
        .messages
        .push(ChatMessage::tool_result(id, "3").into());
    let second = recorder.chat(request.clone()).await;
    let third = recorder
        .chat(ChatRequest::new(vec![ChatMessage::user("again")]))
        .await;
    vec![first, second, third]
}

#[tokio::test]
async fn model_replay_serves_recorded_calls_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cassette.jsonl");
    let recorded = record(&path).await;
    // The header, then one line per call.
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 4);

    let replay = ReplayModel::from_file(&path).unwrap();
    assert_eq!(replay.info().name, "scripted");
    assert_eq!(replay.info().context_window, 4096);
    let mut request = first_request();
    let first = replay.chat(request.clone()).await;
    assert_eq!(first, recorded[0]);
    request.messages.push(first.unwrap().message.into());
    request
        .messages
        .push(ChatMessage::tool_result("call_1", "3").into());
    assert_eq!(replay.chat(request).await, recorded[1]);
    let third = replay
        .chat(ChatRequest::new(vec![ChatMessage::user("again")]))
        .await;
    assert_eq!(
        third,
        Err(ModelError::ContextLengthExceeded("too long".into()))
    );
    assert_eq!(replay.remaining(), 0);
    let err = replay
        .chat(ChatRequest::new(vec![ChatMessage::user("more")]))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("model call 4: the cassette holds no such call (the recorded run made 3)"),
        "{err}"
    );
}

#[tokio::test]
async fn model_replay_mismatch_names_the_difference() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cassette.jsonl");
    record(&path).await;
    let replay = ReplayModel::from_file(&path).unwrap();

    let mut request = first_request();
    request.messages[1] = ChatMessage::user("Add 1 and 3.").into();
    let err = replay.chat(request).await.unwrap_err();
    assert_eq!(err.kind(), "invalid_request", "{err:?}");
    let err = err.to_string();
    assert!(err.starts_with("invalid request (not sent): "), "{err}");
    assert!(
        err.contains("model call 1: the request differs from the recorded one: "),
        "{err}"
    );
    assert!(err.contains("messages[1] (user) content differs"), "{err}");
    assert!(
        err.contains(r#"expected "Add 1 and 2.", got "Add 1 and 3.""#),
        "{err}"
    );

    let mut request = first_request();
    request.messages.pop();
    let err = replay.chat(request).await.unwrap_err().to_string();
    assert!(err.contains("expected 2 messages, got 1"), "{err}");

    let mut request = first_request();
    request.tool_choice = ToolChoice::Required;
    let err = replay.chat(request).await.unwrap_err().to_string();
    assert!(err.contains("tool_choice differs"), "{err}");

    // A mismatch consumes nothing: the right request still gets the first answer.
    assert_eq!(replay.remaining(), 3);
    assert!(
        replay
            .chat(first_request())
            .await
            .unwrap()
            .message
            .has_tool_calls()
    );
}

#[test]
fn model_replay_rejects_a_broken_cassette_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.jsonl");
    std::fs::write(&path, "\n{\"model\": 1}\n").unwrap();
    let err = ReplayModel::from_file(&path).unwrap_err().to_string();
    assert!(err.contains("line 2"), "{err}");
}

fn asked_by(agent: &str, text: &str) -> ChatRequest {
    ChatRequest {
        agent: Some(agent.to_string()),
        ..ChatRequest::new(vec![ChatMessage::user(text)])
    }
}

/// Two agents sharing one model (the compression agent summarising with an agent's model does
/// so) ask in whatever order they run: a replay serves each its own calls in its own order.
#[tokio::test]
async fn model_replay_serves_each_asking_agent_its_own_calls() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.jsonl");
    let echo = ScriptedModel::new(
        "shared",
        ["a1", "b1", "a2", "b2"].map(|t| ScriptedReply::text(format!("answer {t}"))),
    );
    let recorder = RecordingModel::create(echo, &path).unwrap();
    for (agent, text) in [("a", "1"), ("b", "1"), ("a", "2"), ("b", "2")] {
        recorder.chat(asked_by(agent, text)).await.unwrap();
    }
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["cassette"], CASSETTE_VERSION);
    assert_eq!(lines[0]["model"]["name"], "shared");
    assert_eq!(
        (&lines[3]["agent"], &lines[3]["call"]),
        (&json!("a"), &json!(2))
    );

    // Replayed in another interleaving: b's two calls first, then a's.
    let replay = ReplayModel::from_file(&path).unwrap();
    for (agent, text, answer) in [
        ("b", "1", "answer b1"),
        ("b", "2", "answer b2"),
        ("a", "1", "answer a1"),
        ("a", "2", "answer a2"),
    ] {
        let got = replay.chat(asked_by(agent, text)).await.unwrap();
        assert_eq!(got.message.text(), answer);
    }
    assert_eq!(replay.remaining(), 0);
    assert!(replay.unasked().is_none());

    // Asked in another order within one agent: its first call differs, named by agent and call.
    let replay = ReplayModel::from_file(&path).unwrap();
    let err = replay
        .chat(asked_by("a", "2"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("agent `a`, model call 1: the request differs from the recorded one: messages[0] (user) content differs"),
        "{err}"
    );
    let divergence = &replay.divergences()[0];
    assert_eq!(
        (divergence.agent.as_deref(), divergence.call),
        (Some("a"), 1)
    );
    let left = replay.unasked().unwrap();
    assert_eq!(
        left.to_string(),
        "agent `a`, model call 1: the run never asked it (2 recorded call(s) left unasked)"
    );
}

/// A model that streams its answer cut its own way (as a provider's tokens are).
struct Cut(&'static [&'static str]);

#[async_trait]
impl ChatModel for Cut {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: "cut".into(),
            context_window: 1000,
            supports_tools: false,
        }
    }

    async fn chat_stream(&self, _request: ChatRequest) -> Result<ChatStream, ModelError> {
        let mut deltas: Vec<_> = self
            .0
            .iter()
            .map(|t| ModelDelta::Text(t.to_string()))
            .collect();
        deltas.push(ModelDelta::Usage(Usage::default()));
        deltas.push(ModelDelta::Finished(FinishReason::Stop));
        Ok(Box::pin(futures::stream::iter(deltas.into_iter().map(Ok))))
    }
}

async fn text_deltas(model: &dyn ChatModel, request: ChatRequest) -> Vec<String> {
    let mut stream = model.chat_stream(request).await.unwrap();
    let mut texts = Vec::new();
    while let Some(delta) = stream.next().await {
        if let ModelDelta::Text(t) = delta.unwrap() {
            texts.push(t);
        }
    }
    texts
}

/// The answer's deltas are events (`model_delta`): a replay streams them as they came.
#[tokio::test]
async fn model_replay_streams_the_recorded_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.jsonl");
    let cut: &[&str] = &["Hé", "llo, w", "o", "rld!"];
    let recorder = RecordingModel::create(Cut(cut), &path).unwrap();
    assert_eq!(text_deltas(&recorder, asked_by("a", "hi")).await, cut);
    let replay = ReplayModel::from_file(&path).unwrap();
    assert_eq!(replay.info().name, "cut");
    assert_eq!(text_deltas(&replay, asked_by("a", "hi")).await, cut);
}

/// A cassette of the first format (no header, no agent, no call number) still loads, and
/// serves its calls to whichever agent asks.
#[tokio::test]
async fn model_replay_reads_the_first_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.jsonl");
    std::fs::write(
        &path,
        r#"{"model":{"name":"old","context_window":2048,"supports_tools":true},"request":{"messages":[{"role":"user","content":"hi"}]},"response":{"message":{"role":"assistant","content":"hello there"},"usage":{"input_tokens":3,"output_tokens":2},"finish_reason":"stop"}}
"#,
    )
    .unwrap();
    let replay = ReplayModel::from_file(&path).unwrap();
    assert_eq!(replay.info().context_window, 2048);
    assert_eq!(
        text_deltas(&replay, asked_by("coder", "hi")).await,
        ["hell", "o th", "ere"]
    );
}

/// A cassette from another format version, or with a broken line, is refused with what and
/// where, and left byte for byte as it was.
#[test]
fn model_replay_refuses_a_foreign_or_corrupt_cassette_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let future = dir.path().join("future.jsonl");
    let text = "{\"cassette\":99,\"model\":{\"name\":\"m\",\"context_window\":1,\"supports_tools\":true,\"new\":1}}\n{\"calls\":[]}\n";
    std::fs::write(&future, text).unwrap();
    let err = ReplayModel::from_file(&future).unwrap_err();
    assert!(
        matches!(err, ReplayError::Version { ref found, .. } if found == "99"),
        "{err:?}"
    );
    let err = err.to_string();
    assert!(
        err.contains("is format version 99; this troupe reads version 2"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&future).unwrap(), text);

    // A line cut short (a disk full mid-write, a bad merge).
    let cut = dir.path().join("cut.jsonl");
    let mut text = String::new();
    text.push_str("{\"cassette\":2,\"model\":{\"name\":\"m\",\"context_window\":1,\"supports_tools\":true}}\n");
    text.push_str("{\"agent\":\"a\",\"call\":1,\"model\":{\"name\":\"m\",\"context_wi");
    std::fs::write(&cut, &text).unwrap();
    let err = ReplayModel::from_file(&cut).unwrap_err();
    assert!(matches!(err, ReplayError::Parse { line: 2, .. }), "{err:?}");
    assert_eq!(std::fs::read_to_string(&cut).unwrap(), text);
}
