//! The wire format: troupe's request as an OpenAI `chat.completions` request body, and a whole
//! `chat.completion` answer (a server that does not stream) as troupe's response.

use async_openai::types::chat::{
    ChatCompletionMessageToolCalls, ChatCompletionNamedToolChoice, ChatCompletionRequestMessage,
    ChatCompletionStreamOptions, ChatCompletionTool, ChatCompletionToolChoiceOption,
    ChatCompletionTools, CompletionUsage, CreateChatCompletionRequest,
    CreateChatCompletionResponse, FunctionName, FunctionObject, ResponseFormat,
    ResponseFormatJsonSchema, ToolChoiceOptions,
};
use serde_json::Value;
use troupe_protocol::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, ModelError, ToolCall, ToolChoice, Usage,
};

use super::config::{MaxTokensField, OpenAiConfig};

/// troupe's request → the wire request. Messages go through their serde form, which is exactly
/// the OpenAI message JSON, into async-openai's typed messages. The answer is asked for as a
/// stream, with the usage in its last chunk.
pub(super) fn build_request(
    config: &OpenAiConfig,
    request: &ChatRequest,
) -> Result<CreateChatCompletionRequest, ModelError> {
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let value = serde_json::to_value(m).map_err(|e| (i, e.to_string()))?;
            serde_json::from_value::<ChatCompletionRequestMessage>(value)
                .map_err(|e| (i, e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|(i, e)| {
            ModelError::InvalidRequest(format!("message {i} is not a valid chat message: {e}"))
        })?;
    let tools: Vec<ChatCompletionTools> = request
        .tools
        .iter()
        .map(|t| {
            ChatCompletionTools::Function(ChatCompletionTool {
                function: FunctionObject {
                    name: t.name.clone(),
                    description: Some(t.description.clone()).filter(|d| !d.is_empty()),
                    parameters: Some(t.parameters.clone()),
                    strict: None,
                },
            })
        })
        .collect();
    // tool_choice is only meaningful with tools; some servers reject it otherwise.
    let tool_choice = (!tools.is_empty()).then(|| match &request.tool_choice {
        ToolChoice::Auto => ChatCompletionToolChoiceOption::Mode(ToolChoiceOptions::Auto),
        ToolChoice::None => ChatCompletionToolChoiceOption::Mode(ToolChoiceOptions::None),
        ToolChoice::Required => ChatCompletionToolChoiceOption::Mode(ToolChoiceOptions::Required),
        ToolChoice::Named(name) => {
            ChatCompletionToolChoiceOption::Function(ChatCompletionNamedToolChoice {
                function: FunctionName { name: name.clone() },
            })
        }
    });
    let mut wire = CreateChatCompletionRequest {
        model: config.model.clone(),
        messages,
        tools: (!tools.is_empty()).then_some(tools),
        tool_choice,
        response_format: request.response_format.as_ref().map(response_format),
        temperature: request.temperature,
        stream: Some(true),
        stream_options: Some(ChatCompletionStreamOptions {
            include_usage: Some(true),
            include_obfuscation: None,
        }),
        ..Default::default()
    };
    match config.max_tokens_field {
        MaxTokensField::MaxCompletionTokens => wire.max_completion_tokens = request.max_tokens,
        #[allow(deprecated)]
        MaxTokensField::MaxTokens => wire.max_tokens = request.max_tokens,
    }
    Ok(wire)
}

/// A typed ask's schema as OpenAI's structured output: `{type: "json_schema", json_schema:
/// {name, schema, strict}}`.
fn response_format(format: &troupe_protocol::ResponseFormat) -> ResponseFormat {
    ResponseFormat::JsonSchema {
        json_schema: ResponseFormatJsonSchema {
            description: None,
            name: format.name.clone(),
            schema: format.schema.clone(),
            strict: Some(format.strict),
        },
    }
}

/// The wire response → troupe's response.
///
/// Compatible servers are looser than OpenAI: some omit `id`/`created`/`object`, some invent
/// finish reasons. Those fields are normalised on the JSON before the typed parse, and the raw
/// finish reason is kept, so a server's quirk is not a failed call.
pub(super) fn parse_response(bytes: &[u8]) -> Result<ChatResponse, ModelError> {
    let snippet = || {
        String::from_utf8_lossy(bytes)
            .chars()
            .take(200)
            .collect::<String>()
    };
    let mut value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ModelError::InvalidResponse(format!("not JSON ({e}): {}", snippet())))?;
    let Some(object) = value.as_object_mut() else {
        return Err(ModelError::InvalidResponse(format!(
            "not a JSON object: {}",
            snippet()
        )));
    };
    fill_envelope(object, "chat.completion");
    let raw_finish = take_finish_reasons(object).into_iter().next().flatten();
    let wire: CreateChatCompletionResponse = serde_json::from_value(value).map_err(|e| {
        ModelError::InvalidResponse(format!("unexpected shape ({e}): {}", snippet()))
    })?;
    let Some(choice) = wire.choices.into_iter().next() else {
        return Err(ModelError::InvalidResponse(
            "the response has no choices".to_string(),
        ));
    };
    let calls: Vec<ToolCall> = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| match call {
            ChatCompletionMessageToolCalls::Function(f) => {
                ToolCall::new(f.id, f.function.name, f.function.arguments)
            }
            ChatCompletionMessageToolCalls::Custom(c) => {
                ToolCall::new(c.id, c.custom_tool.name, c.custom_tool.input)
            }
        })
        .collect();
    let mut message = if calls.is_empty() {
        ChatMessage::assistant(choice.message.content.unwrap_or_default())
    } else {
        ChatMessage::assistant_tool_calls(choice.message.content, calls)
    };
    if let Some(refusal) = choice.message.refusal {
        message
            .extra
            .insert("refusal".to_string(), Value::String(refusal));
    }
    let finish_reason = finish_reason(raw_finish.as_deref(), message.has_tool_calls());
    let usage = wire.usage.as_ref().map_or_else(Usage::default, usage_of);
    Ok(ChatResponse {
        message,
        usage,
        finish_reason,
    })
}

/// The wire usage → troupe's: `prompt_tokens_details.cached_tokens` (what OpenAI, vLLM and
/// llama.cpp's server read from their prompt cache) is the cache read; OpenAI never reports a
/// cache write.
pub(super) fn usage_of(usage: &CompletionUsage) -> Usage {
    let cached = usage
        .prompt_tokens_details
        .as_ref()
        .and_then(|d| d.cached_tokens)
        .unwrap_or(0);
    Usage {
        input_tokens: u64::from(usage.prompt_tokens),
        output_tokens: u64::from(usage.completion_tokens),
        cache_read_input_tokens: u64::from(cached),
        cache_creation_input_tokens: 0,
    }
}

/// Fill in the envelope fields compatible servers leave out (`id`, `model`, `created`,
/// `object`), so async-openai's typed parse accepts what OpenAI would have sent.
pub(super) fn fill_envelope(object: &mut serde_json::Map<String, Value>, kind: &str) {
    for (key, default) in [("id", ""), ("model", ""), ("object", kind)] {
        object.entry(key).or_insert_with(|| Value::from(default));
    }
    object.entry("created").or_insert_with(|| Value::from(0));
}

/// Each choice's raw `finish_reason`, set to `null` in the JSON: servers invent reasons
/// async-openai's enum does not know, and the raw text is what [`finish_reason`] reads.
pub(super) fn take_finish_reasons(
    object: &mut serde_json::Map<String, Value>,
) -> Vec<Option<String>> {
    let Some(choices) = object.get_mut("choices").and_then(Value::as_array_mut) else {
        return Vec::new();
    };
    choices
        .iter_mut()
        .map(|choice| {
            let reason = choice.get_mut("finish_reason")?;
            let raw = reason.as_str().map(str::to_string);
            *reason = Value::Null;
            raw
        })
        .collect()
}

/// A server's finish reason as troupe's: `stop` with tool calls is [`FinishReason::ToolCalls`]
/// (some servers say `stop` after calls), an unknown one is kept as [`FinishReason::Other`].
pub(super) fn finish_reason(raw: Option<&str>, has_tool_calls: bool) -> FinishReason {
    match raw {
        None | Some("stop") => {
            if has_tool_calls {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            }
        }
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_protocol::ToolDefinition;

    #[test]
    fn request_carries_messages_tools_and_choice_in_wire_shape() {
        let config = OpenAiConfig::new("http://x/v1", "m");
        let call = ToolCall::new("c1", "add", r#"{"a":1}"#);
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system("s").into(),
                ChatMessage::user("u").into(),
                ChatMessage::assistant_tool_calls(None, vec![call]).into(),
                ChatMessage::tool_result("c1", "2").into(),
            ],
            tools: vec![ToolDefinition {
                name: "add".into(),
                description: "adds".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::Named("add".into()),
            temperature: Some(0.5),
            max_tokens: Some(7),
            ..ChatRequest::default()
        };
        let wire = build_request(&config, &request).map(|w| serde_json::to_value(w).ok());
        let wire = wire.ok().flatten().unwrap_or_default();
        assert_eq!(
            wire["messages"][2]["tool_calls"][0]["function"]["name"],
            "add"
        );
        assert_eq!(wire["messages"][3]["tool_call_id"], "c1");
        assert_eq!(wire["tools"][0]["type"], "function");
        assert_eq!(wire["tool_choice"]["function"]["name"], "add");
        assert_eq!(wire["max_tokens"], 7);
        assert_eq!(wire["stream"], true);
        assert_eq!(
            wire["stream_options"],
            serde_json::json!({"include_usage": true})
        );
    }

    #[test]
    fn a_typed_ask_carries_its_schema_as_response_format() {
        let config = OpenAiConfig::new("http://x/v1", "m");
        let format = troupe_protocol::ResponseFormat {
            name: "City".into(),
            schema: serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            strict: false,
        };
        let mut request = ChatRequest::new(vec![ChatMessage::user("u")]);
        let wire = |request: &ChatRequest| {
            let wire = build_request(&config, request).map(|w| serde_json::to_value(w).ok());
            wire.ok().flatten().unwrap_or_default()
        };
        assert!(wire(&request).get("response_format").is_none());
        request.response_format = Some(format.clone());
        assert_eq!(
            wire(&request)["response_format"],
            serde_json::json!({"type": "json_schema", "json_schema": {
                "name": "City", "schema": format.schema, "strict": false}})
        );
    }
}
