//! Message content as the OpenTelemetry GenAI semantic conventions shape it for span attributes:
//! `gen_ai.system_instructions`, `gen_ai.input.messages` and `gen_ai.output.messages` are JSON
//! arrays of `{role, parts}`, each part `{type: "text", content}`, `{type: "tool_call", id,
//! name, arguments}` or `{type: "tool_call_response", id, response}`.
//!
//! Building these costs a serialization of the whole conversation; callers check
//! [`record_content`](super::record_content) first.

use std::borrow::Borrow;

use serde_json::{Value, json};

use crate::message::{ChatMessage, Content, Role};
use crate::model::FinishReason;

/// `gen_ai.system_instructions`: the text parts of the system (and developer) messages, or `None`
/// when there are none.
pub fn system_instructions<M: Borrow<ChatMessage>>(messages: &[M]) -> Option<String> {
    let parts: Vec<Value> = messages
        .iter()
        .map(Borrow::borrow)
        .filter(|m: &&ChatMessage| m.role.is_instructions())
        .flat_map(content_parts)
        .collect();
    (!parts.is_empty()).then(|| Value::Array(parts).to_string())
}

/// `gen_ai.input.messages`: every message but the instructions (those are
/// [`system_instructions`]).
pub fn input_messages<M: Borrow<ChatMessage>>(messages: &[M]) -> String {
    Value::Array(
        messages
            .iter()
            .map(Borrow::borrow)
            .filter(|m: &&ChatMessage| !m.role.is_instructions())
            .map(message)
            .collect(),
    )
    .to_string()
}

/// `gen_ai.output.messages`: the model's answer, with why it stopped.
pub fn output_messages(answer: &ChatMessage, finish_reason: &FinishReason) -> String {
    let mut message = message(answer);
    message["finish_reason"] = Value::String(finish_reason_name(finish_reason).to_string());
    Value::Array(vec![message]).to_string()
}

/// One message as `{role, parts}`.
fn message(message: &ChatMessage) -> Value {
    let mut parts = Vec::new();
    if message.role == Role::Tool {
        parts.push(json!({
            "type": "tool_call_response",
            "id": message.tool_call_id,
            "response": message.text(),
        }));
    } else {
        parts.extend(content_parts(message));
    }
    for call in message.calls() {
        parts.push(json!({
            "type": "tool_call",
            "id": call.id,
            "name": call.function.name,
            "arguments": arguments(&call.function.arguments),
        }));
    }
    json!({ "role": message.role.to_string(), "parts": parts })
}

/// The text (or the content parts) of a message; nothing for an empty or absent content.
fn content_parts(message: &ChatMessage) -> Vec<Value> {
    match message.content.as_content() {
        Some(Content::Text(text)) if !text.is_empty() => {
            vec![json!({ "type": "text", "content": text })]
        }
        Some(Content::Parts(parts)) => parts
            .iter()
            .map(|part| match part.get("text").and_then(Value::as_str) {
                Some(text) => json!({ "type": "text", "content": text }),
                // Images, audio and the like keep the provider's own shape, `type` included.
                None => part.clone(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Tool-call arguments as the JSON object they encode, or the raw text when they do not parse
/// (a model's malformed call is worth seeing as it was).
pub fn arguments(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// The conventions' `finish_reason` values.
fn finish_reason_name(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_call",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn messages_take_the_genai_shape() {
        let call = ToolCall::new("call_1", "lookup", r#"{"topic":"rye"}"#);
        let messages = vec![
            ChatMessage::system("Be brief."),
            ChatMessage::user("Rye?"),
            ChatMessage::assistant_tool_calls(None, vec![call]),
            ChatMessage::tool_result("call_1", "dense and sour"),
        ];
        assert_eq!(
            parse(&system_instructions(&messages).unwrap()),
            json!([{"type": "text", "content": "Be brief."}])
        );
        assert_eq!(
            parse(&input_messages(&messages)),
            json!([
                {"role": "user", "parts": [{"type": "text", "content": "Rye?"}]},
                {"role": "assistant", "parts": [
                    {"type": "tool_call", "id": "call_1", "name": "lookup",
                     "arguments": {"topic": "rye"}}
                ]},
                {"role": "tool", "parts": [
                    {"type": "tool_call_response", "id": "call_1", "response": "dense and sour"}
                ]},
            ])
        );
        assert_eq!(
            parse(&output_messages(
                &ChatMessage::assistant("Dense."),
                &FinishReason::Stop
            )),
            json!([{"role": "assistant", "parts": [{"type": "text", "content": "Dense."}],
                    "finish_reason": "stop"}])
        );
        assert_eq!(system_instructions(&messages[1..]), None);
        assert_eq!(arguments("not json"), Value::String("not json".into()));
    }
}
