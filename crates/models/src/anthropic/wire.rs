//! The Messages wire format: troupe's request as a `POST /v1/messages` body, with troupe's
//! prompt-cache breakpoints, and Anthropic's usage as troupe's.
//!
//! - The leading instruction messages (`system`, `developer`) become the top-level `system`
//!   field; an instruction later in the conversation becomes a user text (the Messages API has
//!   no system role in `messages`).
//! - An assistant's tool calls become `tool_use` blocks, tool results `tool_result` blocks in a
//!   user message; consecutive messages of one role are merged into one (the results of one
//!   turn's calls must all be in the user message that follows it).
//! - `cache_control: {"type": "ephemeral"}` marks go where
//!   [`anthropic_breakpoints`] says — the one placement rule, which the cost model replays
//!   too: after the system prompt (the tools ride in front of it, so they are cached with
//!   it), after the newest compaction summary (the new stable prefix), at the end of the
//!   previous turn and on the last block. A mark on a message that has no block on the wire
//!   (an empty one) moves to the block before it.

use serde::Deserialize;
use serde_json::{Map, Value, json};
use troupe_protocol::{ChatMessage, ChatRequest, Content, FinishReason, Role, ToolChoice, Usage};
use troupe_tokens::prompt_cache::anthropic_breakpoints;

use super::config::AnthropicConfig;

/// Where one troupe message's last block landed on the wire.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// The `system` array's block.
    System(usize),
    /// `messages[message].content[block]`.
    Message(usize, usize),
}

/// The tool a typed ask's answer comes through: the Messages API has no `response_format`,
/// so the answer is asked for as the input of a tool named after the format, whose
/// `input_schema` is the format's schema, and read back as the answer's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AnswerTool {
    /// The tool's name: the format's.
    pub(super) name: String,
    /// Whether the schema is not an object schema and was wrapped as the `value` property of
    /// one (a tool's input must be an object).
    pub(super) wrapped: bool,
}

/// The key a wrapped answer sits under.
pub(super) const WRAPPED_KEY: &str = "value";

/// troupe's request → the Messages request body, streamed, with cache marks; and the answer
/// tool, for a typed ask.
pub(super) fn build_request(
    config: &AnthropicConfig,
    request: &ChatRequest,
) -> (Value, Option<AnswerTool>) {
    let mut system: Vec<Value> = Vec::new();
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    // For each troupe message, where its last block went (`None`: no block on the wire).
    let mut places: Vec<Option<Place>> = Vec::with_capacity(request.messages.len());
    let leading = request
        .messages
        .iter()
        .take_while(|m| m.role.is_instructions())
        .count();
    for (i, message) in request.messages.iter().enumerate() {
        if i < leading {
            let text = message.text();
            places.push((!text.trim().is_empty()).then(|| {
                system.push(json!({"type": "text", "text": text}));
                Place::System(system.len() - 1)
            }));
            continue;
        }
        let (role, blocks) = blocks_of(message);
        if blocks.is_empty() {
            places.push(None);
            continue;
        }
        match messages.last_mut() {
            Some((last_role, content)) if *last_role == role => content.extend(blocks),
            _ => messages.push((role, blocks)),
        }
        let at = messages.len() - 1;
        places.push(Some(Place::Message(at, messages[at].1.len() - 1)));
    }
    for mark in anthropic_breakpoints(&request.messages) {
        let place = places[..=mark.min(places.len().saturating_sub(1))]
            .iter()
            .rev()
            .find_map(|p| *p);
        let block = match place {
            Some(Place::System(b)) => system.get_mut(b),
            Some(Place::Message(m, b)) => messages.get_mut(m).and_then(|(_, c)| c.get_mut(b)),
            None => None,
        };
        if let Some(Value::Object(block)) = block {
            block.insert("cache_control".to_string(), json!({"type": "ephemeral"}));
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));
    body.insert(
        "max_tokens".into(),
        json!(request.max_tokens.unwrap_or(config.max_tokens)),
    );
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert(
        "messages".into(),
        Value::Array(
            messages
                .into_iter()
                .map(|(role, content)| json!({"role": role, "content": content}))
                .collect(),
        ),
    );
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| {
            let mut tool = json!({"name": t.name, "input_schema": t.parameters});
            if !t.description.is_empty() {
                tool["description"] = json!(t.description);
            }
            tool
        })
        .collect();
    let answer = request.response_format.as_ref().map(|format| {
        let (schema, wrapped) = input_schema(&format.schema);
        tools.push(json!({
            "name": format.name,
            "description": "Give your final answer as this tool's input.",
            "input_schema": schema,
        }));
        AnswerTool {
            name: format.name.clone(),
            wrapped,
        }
    });
    if !tools.is_empty() {
        // tool_choice is only meaningful with tools; the API rejects it otherwise.
        let choice = match (&request.tool_choice, &answer) {
            (ToolChoice::Named(name), _) => json!({"type": "tool", "name": name}),
            // A typed ask: the answer tool when no other tool may be called, else some tool —
            // a real one, or the answer.
            (ToolChoice::None, Some(answer)) => json!({"type": "tool", "name": answer.name}),
            (_, Some(answer)) if request.tools.is_empty() => {
                json!({"type": "tool", "name": answer.name})
            }
            (_, Some(_)) | (ToolChoice::Required, None) => json!({"type": "any"}),
            (ToolChoice::Auto, None) => json!({"type": "auto"}),
            (ToolChoice::None, None) => json!({"type": "none"}),
        };
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), choice);
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("stream".into(), json!(true));
    (Value::Object(body), answer)
}

/// A format's schema as a tool's `input_schema`, which must be an object schema: one that is
/// not becomes the `value` property of one, its `$defs` moved up so its `$ref`s still resolve.
fn input_schema(schema: &Value) -> (Value, bool) {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        return (schema.clone(), false);
    }
    let mut inner = schema.clone();
    let defs = inner.as_object_mut().and_then(|o| o.remove("$defs"));
    let mut wrapper = json!({
        "type": "object",
        "properties": {WRAPPED_KEY: inner},
        "required": [WRAPPED_KEY],
    });
    if let Some(defs) = defs {
        wrapper["$defs"] = defs;
    }
    (wrapper, true)
}

/// One troupe message as a wire role and its content blocks (none for an empty message: the
/// API refuses empty text blocks).
fn blocks_of(message: &ChatMessage) -> (&'static str, Vec<Value>) {
    match message.role {
        Role::Assistant => {
            let mut blocks = text_blocks(message.content.as_content());
            for call in message.calls() {
                blocks.push(json!({
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.function.name,
                    "input": tool_input(&call.function.arguments),
                }));
            }
            ("assistant", blocks)
        }
        Role::Tool => {
            let mut block = json!({
                "type": "tool_result",
                "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
            });
            let text = message.text();
            if !text.is_empty() {
                block["content"] = json!(text);
            }
            ("user", vec![block])
        }
        Role::User | Role::System | Role::Developer => {
            ("user", text_blocks(message.content.as_content()))
        }
    }
}

/// Content as blocks: text (skipped when empty), and OpenAI-style `image_url` parts as image
/// blocks (a `data:` URL as base64, any other as a URL source).
fn text_blocks(content: Option<&Content>) -> Vec<Value> {
    let text = |t: &str| (!t.trim().is_empty()).then(|| json!({"type": "text", "text": t}));
    match content {
        None => Vec::new(),
        Some(Content::Text(t)) => text(t).into_iter().collect(),
        Some(Content::Parts(parts)) => parts
            .iter()
            .filter_map(|part| match part.get("type").and_then(Value::as_str) {
                Some("text") => part.get("text").and_then(Value::as_str).and_then(text),
                Some("image_url") => {
                    let url = part
                        .get("image_url")
                        .and_then(|i| i.get("url"))
                        .and_then(Value::as_str)?;
                    Some(image_block(url))
                }
                _ => None,
            })
            .collect(),
    }
}

fn image_block(url: &str) -> Value {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((media_type, data)) = rest.split_once(";base64,")
    {
        return json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}});
    }
    json!({"type": "image", "source": {"type": "url", "url": url}})
}

/// A tool call's arguments as the object `tool_use.input` must be. Arguments that are not a
/// JSON object (a small model's malformed call, kept verbatim in the conversation) go as `{}`:
/// the API refuses anything else, and the call's tool result already told the model what was
/// wrong with them.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => json!({}),
    }
}

/// Anthropic's usage object; its fields arrive spread over `message_start` and `message_delta`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) output_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// This usage with the fields `later` carries replacing its own (`message_delta`'s counts
    /// are cumulative).
    pub(super) fn updated(self, later: WireUsage) -> WireUsage {
        WireUsage {
            input_tokens: later.input_tokens.or(self.input_tokens),
            output_tokens: later.output_tokens.or(self.output_tokens),
            cache_creation_input_tokens: later
                .cache_creation_input_tokens
                .or(self.cache_creation_input_tokens),
            cache_read_input_tokens: later
                .cache_read_input_tokens
                .or(self.cache_read_input_tokens),
        }
    }

    /// troupe's usage: Anthropic's `input_tokens` counts only the tokens after the last cache
    /// mark, so the prompt is the three input counts added up — saturating: counts that add up
    /// past `u64` are absurd, but wrapped they would read as a tiny prompt to the budget, the
    /// cost and a shared rate limit.
    pub(super) fn to_usage(self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let created = self.cache_creation_input_tokens.unwrap_or(0);
        Usage {
            input_tokens: self
                .input_tokens
                .unwrap_or(0)
                .saturating_add(read)
                .saturating_add(created),
            output_tokens: self.output_tokens.unwrap_or(0),
            cache_read_input_tokens: read,
            cache_creation_input_tokens: created,
        }
    }
}

/// A `stop_reason` as troupe's finish reason.
pub(super) fn finish_reason(raw: &str, has_tool_calls: bool) -> FinishReason {
    match raw {
        "end_turn" | "stop_sequence" if has_tool_calls => FinishReason::ToolCalls,
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use troupe_protocol::{MessageKind, ToolCall, ToolDefinition};

    use super::*;

    fn marked(block: &Value) -> bool {
        block.get("cache_control") == Some(&json!({"type": "ephemeral"}))
    }

    #[test]
    fn roles_tools_and_marks_land_where_the_rule_says() {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system("be brief").into(),
                ChatMessage::user("task").into(),
                ChatMessage::user("summary")
                    .with_kind(MessageKind::Summary)
                    .into(),
                ChatMessage::assistant_tool_calls(
                    Some("looking".into()),
                    vec![
                        ToolCall::new("c1", "read", r#"{"path":"a"}"#),
                        ToolCall::new("c2", "read", "not json"),
                    ],
                )
                .into(),
                ChatMessage::tool_result("c1", "A").into(),
                ChatMessage::tool_result("c2", "").into(),
                ChatMessage::user("next").into(),
            ],
            tools: vec![ToolDefinition {
                name: "read".into(),
                description: "reads".into(),
                parameters: json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::Required,
            max_tokens: None,
            ..ChatRequest::default()
        };
        let (body, _) = build_request(&AnthropicConfig::new("http://x", "claude"), &request);
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        assert!(marked(&body["system"][0]), "{body}");
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        // user(task + summary), assistant(text + 2 tool_use), user(2 tool_result + next)
        assert_eq!(messages.len(), 3, "{body}");
        assert_eq!(messages[0]["content"][1]["text"], "summary");
        assert!(!marked(&messages[0]["content"][0]));
        assert!(marked(&messages[0]["content"][1]), "after the summary");
        assert_eq!(messages[1]["content"][2]["input"], json!({}));
        assert_eq!(messages[1]["content"][1]["input"], json!({"path": "a"}));
        let results = &messages[2]["content"];
        assert_eq!(results[0]["tool_use_id"], "c1");
        assert!(results[1].get("content").is_none());
        // The end of the previous turn is the block before the newest user message.
        assert!(marked(&results[1]), "end of the previous turn: {body}");
        assert!(marked(&results[2]), "the last block");
        let marks = body.to_string().matches("ephemeral").count();
        assert_eq!(marks, 4);
    }

    #[test]
    fn a_mark_on_an_empty_message_moves_back_and_usage_adds_up() {
        let request = ChatRequest::new(vec![
            ChatMessage::user("hi"),
            ChatMessage::assistant(""),
            ChatMessage::user("again"),
        ]);
        let (body, _) = build_request(&AnthropicConfig::new("http://x", "claude"), &request);
        assert!(body.get("system").is_none());
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(1));
        assert!(marked(&body["messages"][0]["content"][0]));
        assert!(marked(&body["messages"][0]["content"][1]));
        let usage = WireUsage {
            input_tokens: Some(5),
            output_tokens: Some(1),
            cache_creation_input_tokens: Some(10),
            cache_read_input_tokens: None,
        }
        .updated(WireUsage {
            output_tokens: Some(9),
            cache_read_input_tokens: Some(100),
            ..WireUsage::default()
        })
        .to_usage();
        assert_eq!(
            usage,
            Usage {
                input_tokens: 115,
                output_tokens: 9,
                cache_read_input_tokens: 100,
                cache_creation_input_tokens: 10,
            }
        );
    }

    #[test]
    fn input_counts_that_add_past_u64_saturate_instead_of_wrapping() {
        let usage = WireUsage {
            input_tokens: Some(u64::MAX),
            output_tokens: Some(u64::MAX),
            cache_creation_input_tokens: Some(7),
            cache_read_input_tokens: Some(5),
        }
        .to_usage();
        assert_eq!(
            usage,
            Usage {
                input_tokens: u64::MAX,
                output_tokens: u64::MAX,
                cache_read_input_tokens: 5,
                cache_creation_input_tokens: 7,
            }
        );
    }

    #[test]
    fn a_typed_ask_is_a_forced_answer_tool_and_a_non_object_schema_is_wrapped() {
        let format = |schema: Value| troupe_protocol::ResponseFormat {
            name: "City".into(),
            schema,
            strict: false,
        };
        let mut request = ChatRequest::new(vec![ChatMessage::user("u")]);
        request.response_format = Some(format(json!({"type": "object", "properties": {}})));
        let config = AnthropicConfig::new("http://x", "claude");
        let (body, answer) = build_request(&config, &request);
        assert_eq!(
            answer,
            Some(AnswerTool {
                name: "City".into(),
                wrapped: false
            })
        );
        assert_eq!(body["tools"][0]["name"], "City");
        assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "City"}));
        // With tools of its own the model must call one of them or answer.
        request.tools = vec![ToolDefinition {
            name: "read".into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }];
        let (body, _) = build_request(&config, &request);
        assert_eq!(body["tools"][1]["name"], "City");
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        request.tools.clear();
        request.response_format = Some(format(json!({
            "$ref": "#/$defs/Size",
            "$defs": {"Size": {"enum": ["S", "L"]}}
        })));
        let (body, answer) = build_request(&config, &request);
        assert!(answer.is_some_and(|a| a.wrapped));
        let schema = &body["tools"][0]["input_schema"];
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["value"]["$ref"], "#/$defs/Size");
        assert_eq!(schema["$defs"]["Size"]["enum"], json!(["S", "L"]));
    }
}
