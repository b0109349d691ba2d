//! The assembler's and the delta helpers' tests.
use super::*;

fn started(index: usize, id: &str, name: &str) -> ModelDelta {
    ModelDelta::ToolCallStarted {
        index,
        id: id.into(),
        name: name.into(),
    }
}

fn args(index: usize, fragment: &str) -> ModelDelta {
    ModelDelta::ToolCallArguments {
        index,
        fragment: fragment.into(),
    }
}

fn assemble(deltas: &[ModelDelta]) -> Result<ChatResponse, ModelError> {
    let mut assembler = ResponseAssembler::new();
    for delta in deltas {
        assembler.push(delta)?;
    }
    assembler.finish()
}

/// A provider that repeats or leaves out call ids (a hostile model, a broken server): every
/// call still gets an id of its own, the first keeping the one it was given.
#[test]
fn repeated_and_empty_call_ids_are_made_unique_when_the_answer_arrives() {
    let response = assemble(&[
        started(0, "dup", "shell"),
        args(0, r#"{"command":"echo harmless"}"#),
        started(1, "dup", "shell"),
        args(1, r#"{"command":"rm victim2.txt"}"#),
        started(2, "", "shell"),
        started(3, "dup_2", "shell"),
        started(4, "", "shell"),
        ModelDelta::Finished(FinishReason::ToolCalls),
    ])
    .unwrap();
    let ids: Vec<&str> = response
        .message
        .calls()
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["dup", "dup_3", "call_2", "dup_2", "call_4"]);
    // Each id still goes with its own call's arguments.
    assert!(
        response.message.calls()[0]
            .function
            .arguments
            .contains("harmless")
    );
    assert!(
        response.message.calls()[1]
            .function
            .arguments
            .contains("victim2")
    );
}

#[test]
fn text_fragments_concatenate_and_usage_may_follow_the_finish() {
    let usage = Usage {
        input_tokens: 3,
        output_tokens: 4,
        ..Default::default()
    };
    let response = assemble(&[
        ModelDelta::Text("Os".into()),
        ModelDelta::Text("lo é".into()),
        ModelDelta::Finished(FinishReason::Stop),
        ModelDelta::Usage(usage),
    ])
    .unwrap();
    assert_eq!(response.message.text(), "Oslo é");
    assert!(!response.message.has_tool_calls());
    assert_eq!(response.usage, usage);
    assert_eq!(response.finish_reason, FinishReason::Stop);
}

#[test]
fn interleaved_and_out_of_order_calls_are_assembled_by_index() {
    let response = assemble(&[
        started(1, "b", "get_time"),
        args(1, r#"{"tz":"#),
        started(0, "a", "get_weather"),
        args(0, r#"{"city""#),
        args(1, r#""UTC"}"#),
        args(0, r#":"Oslo"}"#),
        ModelDelta::Finished(FinishReason::Stop),
    ])
    .unwrap();
    let calls = response.message.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].function.name.as_str()),
        ("a", "get_weather")
    );
    assert_eq!(calls[0].function.arguments, r#"{"city":"Oslo"}"#);
    assert_eq!(calls[1].function.arguments, r#"{"tz":"UTC"}"#);
    // `stop` after tool calls is normalised; no text is `null` content.
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        serde_json::to_value(&response.message).unwrap()["content"],
        serde_json::Value::Null
    );
}

#[test]
fn malformed_sequences_are_invalid_responses() {
    let finished = ModelDelta::Finished(FinishReason::Stop);
    let cases: Vec<(Vec<ModelDelta>, &str)> = vec![
        (vec![args(0, "{}"), finished.clone()], "has not started"),
        (
            vec![started(0, "a", "f"), args(1, "{}"), finished.clone()],
            "tool call 1, which has not started",
        ),
        (
            vec![started(0, "a", "f"), started(0, "b", "g"), finished.clone()],
            "started twice",
        ),
        (
            vec![finished.clone(), ModelDelta::Text("more".into())],
            "went on after the model finished",
        ),
        (vec![finished.clone(), finished.clone()], "a second finish"),
        (vec![ModelDelta::Text("cut".into())], "no finish reason"),
    ];
    for (deltas, expected) in cases {
        match assemble(&deltas) {
            Err(ModelError::InvalidResponse(message)) => {
                assert!(message.contains(expected), "{deltas:?}: {message}")
            }
            other => panic!("{deltas:?}: expected InvalidResponse, got {other:?}"),
        }
    }
}

#[test]
fn a_response_streams_in_chunks_on_char_boundaries_and_collects_back() {
    let text = ChatResponse {
        message: ChatMessage::assistant("héllo wörld ✓"),
        usage: Usage {
            input_tokens: 1,
            output_tokens: 2,
            ..Default::default()
        },
        finish_reason: FinishReason::Length,
    };
    let deltas = response_deltas(text.clone(), 4);
    let pieces: Vec<&str> = deltas
        .iter()
        .filter_map(|d| match d {
            ModelDelta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(pieces, ["héll", "o wö", "rld ", "✓"]);
    let calls = ChatResponse {
        message: ChatMessage::assistant_tool_calls(
            None,
            vec![
                ToolCall::new("c1", "f", r#"{"a":1}"#),
                ToolCall::new("c2", "g", "{}"),
            ],
        ),
        usage: Usage::default(),
        finish_reason: FinishReason::ToolCalls,
    };
    for response in [text, calls] {
        let collected =
            futures::executor::block_on(collect_stream(stream_response(response.clone(), 3)));
        assert_eq!(collected.unwrap(), response);
    }
}

#[test]
fn fields_troupe_does_not_interpret_survive_the_stream() {
    // A refusal, a provider's reasoning and Gemini's thought signature on a tool call: a
    // whole answer streamed and collected keeps every one, exactly.
    let mut call = ToolCall::new("c1", "f", "{}");
    call.extra.insert(
        "extra_content",
        serde_json::json!({"google": {"thought_signature": "sig=="}}),
    );
    call.function
        .extra
        .insert("strict", serde_json::json!(true));
    let mut message = ChatMessage::assistant_tool_calls(Some("thinking".into()), vec![call]);
    message.extra.insert("refusal", "I would rather not.");
    message.extra.insert("reasoning_content", "Because.");
    let response = ChatResponse {
        message,
        usage: Usage::default(),
        finish_reason: FinishReason::ToolCalls,
    };
    let collected =
        futures::executor::block_on(collect_stream(stream_response(response.clone(), 2)));
    assert_eq!(collected.unwrap(), response);

    // Streamed text fields arrive in pieces and are joined; other values replace.
    let field = |key: &str, value: WireValue| ModelDelta::MessageField {
        key: key.into(),
        value,
    };
    let joined = assemble(&[
        field("refusal", "I would ".into()),
        field("refusal", "rather not.".into()),
        field("n", serde_json::json!(1).into()),
        field("n", serde_json::json!(2).into()),
        ModelDelta::Finished(FinishReason::Stop),
    ])
    .unwrap();
    assert_eq!(
        joined
            .message
            .extra
            .get("refusal")
            .and_then(WireValue::as_str),
        Some("I would rather not.")
    );
    assert_eq!(
        joined.message.extra.get("n").map(WireValue::to_value),
        Some(serde_json::json!(2))
    );
    // Fields of a call that never started are a malformed answer.
    let orphan = assemble(&[
        ModelDelta::ToolCallFields {
            index: 3,
            call: WireFields::new(),
            function: WireFields::new(),
        },
        ModelDelta::Finished(FinishReason::Stop),
    ]);
    assert!(
        matches!(orphan, Err(ModelError::InvalidResponse(_))),
        "{orphan:?}"
    );
}
