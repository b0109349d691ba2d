//! Recording a model's calls to JSONL and serving them back.

use serde_json::json;
use troupe_models::{RecordingModel, ReplayModel, ScriptedModel, ScriptedReply};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ModelError, ToolChoice, ToolDefinition,
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
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);

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
    assert!(err.to_string().contains("no more recorded calls"), "{err}");
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
    assert!(err.contains("replay call 1"), "{err}");
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
