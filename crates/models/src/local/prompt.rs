//! Turning a [`ChatRequest`] into what a small local model can follow, and its output back into
//! a tool call: the tool-call policy, the prompt's messages, the JSON schema that constrains a
//! tool call, and the parse of the constrained output. No llama.cpp here.

use std::collections::HashMap;

use serde_json::{Map, Value, json};
use troupe_protocol::ResponseFormat;
use troupe_protocol::{ChatMessage, ChatRequest, Role, ToolChoice, ToolDefinition};

/// When a request with tools and `tool_choice: auto` gets a tool call from the local model.
///
/// A 135M model asked to *choose* between answering and calling a tool almost never emits a
/// well-formed call on its own, so the choice is made by this policy and the call is then
/// constrained by a grammar (always valid JSON, always a known tool, arguments matching the
/// tool's schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoToolCalls {
    /// Call a tool when the conversation ends with a user message (a fresh request); answer in
    /// text when it ends with tool results. One tool round per user turn: enough for "use the
    /// tool, then report", and it cannot loop forever.
    #[default]
    AfterUserMessage,
    /// Always call a tool (the caller ends the loop).
    Always,
    /// Never call a tool under `auto`; only `required` or a named tool force one.
    Never,
}

/// What the model must produce for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Output<'a> {
    /// Free text.
    Text,
    /// A JSON value matching the request's response format (a typed ask's answer).
    Json(&'a ResponseFormat),
    /// Exactly one call of one of these tools.
    ToolCall(Vec<&'a ToolDefinition>),
}

/// Decide between an answer (text, or JSON when the request has a response format) and a
/// tool call.
///
/// # Errors
/// A message when `tool_choice` names a tool the request does not offer.
pub(crate) fn output_for<'a>(
    request: &'a ChatRequest,
    policy: AutoToolCalls,
) -> Result<Output<'a>, String> {
    let answer = match &request.response_format {
        Some(format) => Output::Json(format),
        None => Output::Text,
    };
    if request.tools.is_empty() {
        return Ok(answer);
    }
    let all = || request.tools.iter().collect::<Vec<_>>();
    match &request.tool_choice {
        ToolChoice::None => Ok(answer),
        ToolChoice::Required => Ok(Output::ToolCall(all())),
        ToolChoice::Named(name) => request
            .tools
            .iter()
            .find(|t| &t.name == name)
            .map(|t| Output::ToolCall(vec![t]))
            .ok_or_else(|| format!("tool_choice names `{name}`, which is not among the tools")),
        ToolChoice::Auto => {
            let last = request
                .messages
                .iter()
                .rev()
                .find(|m| !m.role.is_instructions());
            let call = match policy {
                AutoToolCalls::Always => true,
                AutoToolCalls::Never => false,
                AutoToolCalls::AfterUserMessage => last.is_some_and(|m| m.role == Role::User),
            };
            Ok(if call {
                Output::ToolCall(all())
            } else {
                answer
            })
        }
    }
}

/// The conversation as `(role, content)` pairs for the model's chat template.
///
/// When a call is wanted, earlier tool calls are written as the same JSON the grammar makes the
/// model produce; when a text answer is wanted they are written in prose, and the last tool
/// result asks for the answer — a small model otherwise imitates the JSON in its answer. Tool
/// results are user messages naming the tool: every chat template knows `user`, not all know
/// `tool`. Tool instructions go into the system message only when a call is wanted.
pub(crate) fn render(request: &ChatRequest, output: &Output<'_>) -> Vec<(String, String)> {
    let calling = matches!(output, Output::ToolCall(_));
    let last_result = request
        .messages
        .iter()
        .rposition(|m| m.role == Role::Tool)
        .filter(|&i| i + 1 == request.messages.len());
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut rendered = Vec::with_capacity(request.messages.len() + 1);
    for (index, message) in request.messages.iter().enumerate() {
        let content = match message.role {
            Role::Assistant if message.has_tool_calls() => {
                let mut text = message.text();
                for call in message.calls() {
                    names.insert(&call.id, &call.function.name);
                    let arguments: Value =
                        serde_json::from_str(&call.function.arguments).unwrap_or(Value::Null);
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    if calling {
                        // Written by hand: `json!` would sort the keys, and the grammar puts the
                        // name first (so the model commits to a tool before its arguments).
                        text.push_str(&format!(
                            r#"{{"name": {}, "arguments": {arguments}}}"#,
                            Value::String(call.function.name.clone())
                        ));
                    } else {
                        text.push_str(&format!(
                            "I called the tool {} with {arguments}.",
                            call.function.name
                        ));
                    }
                }
                text
            }
            Role::Tool => {
                let id = message.tool_call_id.as_deref().unwrap_or_default();
                let name = names.get(id).copied().unwrap_or("the tool");
                let mut text = format!("Result of {name}:\n{}", message.text());
                if !calling && last_result == Some(index) {
                    text.push_str(match output {
                        Output::Json(_) => "\n\nNow answer the request using this result, as JSON.",
                        _ => "\n\nNow answer the request using this result, in plain words.",
                    });
                }
                text
            }
            _ => message.text(),
        };
        let role = match message.role {
            Role::System | Role::Developer => "system",
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        rendered.push((role.to_string(), content));
    }
    let instructions = match output {
        Output::ToolCall(tools) => Some(tool_instructions(tools, &request.tool_choice)),
        Output::Json(format) => Some(json_instructions(format)),
        Output::Text => None,
    };
    if let Some(instructions) = instructions {
        match rendered.first_mut() {
            Some((role, content)) if role == "system" => {
                content.push_str("\n\n");
                content.push_str(&instructions);
            }
            _ => rendered.insert(0, ("system".to_string(), instructions)),
        }
    }
    rendered
}

/// What a small model needs to fill a typed answer sensibly: the schema (the grammar keeps
/// the output valid, the schema's names and descriptions tell the model what goes where).
fn json_instructions(format: &ResponseFormat) -> String {
    format!(
        "Reply only with one JSON value that matches this JSON schema:\n{}",
        format.schema
    )
}

fn tool_instructions(tools: &[&ToolDefinition], choice: &ToolChoice) -> String {
    let mut text = String::from("You can call these tools:\n");
    for tool in tools {
        text.push_str(&format!(
            "- {}: {}\n  arguments: {}\n",
            tool.name, tool.description, tool.parameters
        ));
    }
    match choice {
        ToolChoice::Named(name) => text.push_str(&format!("Call the tool `{name}` now.")),
        _ => text.push_str("Call the one tool that fits the request."),
    }
    text.push_str(" Reply only with JSON: {\"name\": \"<tool>\", \"arguments\": {...}}");
    text
}

/// The JSON schema of one tool call: a `oneOf` with one branch per tool,
/// `{"name": {"const": NAME}, "arguments": <the tool's parameters>}`.
///
/// Each tool's `$defs`/`definitions` are hoisted to the root (renamed per tool, references
/// rewritten), because a `$ref` like `#/$defs/Point` resolves against the document root, which
/// is no longer the tool's schema once it is nested in a branch.
pub(crate) fn tool_call_schema(tools: &[&ToolDefinition]) -> Value {
    let mut defs = Map::new();
    let mut branches: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let mut parameters = match &tool.parameters {
                Value::Object(o) if !o.is_empty() => Value::Object(o.clone()),
                _ => json!({"type": "object"}),
            };
            hoist_definitions(&mut parameters, &format!("t{i}_"), &mut defs);
            json!({
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": parameters},
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    let mut schema = if branches.len() == 1 {
        branches.remove(0)
    } else {
        json!({"oneOf": branches})
    };
    if !defs.is_empty()
        && let Some(o) = schema.as_object_mut()
    {
        o.insert("$defs".to_string(), Value::Object(defs));
    }
    schema
}

/// A looser schema for when a tool's own schema is beyond the grammar converter: the tool name
/// is still constrained, the arguments are any JSON object.
pub(crate) fn loose_tool_call_schema(tools: &[&ToolDefinition]) -> Value {
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    json!({
        "type": "object",
        "properties": {"name": {"enum": names}, "arguments": {"type": "object"}},
        "required": ["name", "arguments"],
        "additionalProperties": false,
    })
}

fn hoist_definitions(schema: &mut Value, prefix: &str, defs: &mut Map<String, Value>) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("$schema");
    let mut local = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = object.remove(key) {
            local.extend(d);
        }
    }
    rewrite_refs(schema, prefix);
    for (name, mut def) in local {
        rewrite_refs(&mut def, prefix);
        defs.insert(format!("{prefix}{name}"), def);
    }
}

fn rewrite_refs(value: &mut Value, prefix: &str) {
    match value {
        Value::Object(o) => {
            for (key, v) in o.iter_mut() {
                if key == "$ref" {
                    if let Some(r) = v.as_str() {
                        let name = r
                            .strip_prefix("#/$defs/")
                            .or_else(|| r.strip_prefix("#/definitions/"));
                        if let Some(name) = name {
                            *v = Value::String(format!("#/$defs/{prefix}{name}"));
                        }
                    }
                } else {
                    rewrite_refs(v, prefix);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| rewrite_refs(v, prefix)),
        _ => {}
    }
}

/// Parse the constrained output `{"name": …, "arguments": {…}}` into `(name, arguments JSON)`.
///
/// # Errors
/// A message when the text is not such an object or names a tool not offered (only possible
/// when generation was cut off by the token limit).
pub(crate) fn parse_tool_call(
    text: &str,
    tools: &[&ToolDefinition],
) -> Result<(String, String), String> {
    let value: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("the tool call is not valid JSON ({e}): {text}"))?;
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the tool call has no name: {text}"))?;
    if !tools.iter().any(|t| t.name == name) {
        return Err(format!("the tool call names an unknown tool `{name}`"));
    }
    let arguments = value.get("arguments").cloned().unwrap_or_else(|| json!({}));
    Ok((name.to_string(), arguments.to_string()))
}

/// A rendered message list as plain ChatML, for GGUFs that carry no chat template.
pub(crate) fn chatml(messages: &[(String, String)]) -> String {
    let mut prompt = String::new();
    for (role, content) in messages {
        prompt.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
    }
    prompt.push_str("<|im_start|>assistant\n");
    prompt
}

/// The assistant message for a parsed tool call.
pub(crate) fn tool_call_message(id: String, name: String, arguments: String) -> ChatMessage {
    ChatMessage::assistant_tool_calls(
        None,
        vec![troupe_protocol::ToolCall::new(id, name, arguments)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: format!("{name} tool"),
            parameters,
        }
    }

    #[test]
    fn auto_policy_calls_after_user_and_answers_after_results() {
        let mut request = ChatRequest::new(vec![ChatMessage::user("weather?")]);
        request.tools = vec![tool("weather", json!({"type": "object"}))];
        let policy = AutoToolCalls::AfterUserMessage;
        assert!(matches!(
            output_for(&request, policy),
            Ok(Output::ToolCall(_))
        ));
        request.messages.push(
            ChatMessage::assistant_tool_calls(
                None,
                vec![troupe_protocol::ToolCall::new("c1", "weather", "{}")],
            )
            .into(),
        );
        request
            .messages
            .push(ChatMessage::tool_result("c1", "sunny").into());
        assert_eq!(output_for(&request, policy), Ok(Output::Text));
        request.tool_choice = ToolChoice::Named("nope".into());
        assert!(output_for(&request, policy).is_err());
    }

    #[test]
    fn a_response_format_makes_the_answer_json_and_tool_calls_stay_calls() {
        let format = ResponseFormat {
            name: "Pet".into(),
            schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            strict: false,
        };
        let mut request = ChatRequest::new(vec![ChatMessage::user("describe")]);
        request.response_format = Some(format.clone());
        assert_eq!(
            output_for(&request, AutoToolCalls::AfterUserMessage),
            Ok(Output::Json(&format))
        );
        let rendered = render(&request, &Output::Json(&format));
        assert_eq!(rendered[0].0, "system");
        assert!(rendered[0].1.contains(r#""name""#), "{}", rendered[0].1);
        // A tool call the policy wants is still a call; the answer after it is the JSON.
        request.tools = vec![tool("lookup", json!({"type": "object"}))];
        assert!(matches!(
            output_for(&request, AutoToolCalls::AfterUserMessage),
            Ok(Output::ToolCall(_))
        ));
        request.tool_choice = ToolChoice::None;
        assert_eq!(
            output_for(&request, AutoToolCalls::AfterUserMessage),
            Ok(Output::Json(&format))
        );
    }

    #[test]
    fn tool_results_are_rendered_as_user_messages_naming_the_tool() {
        let request = ChatRequest::new(vec![
            ChatMessage::user("weather?"),
            ChatMessage::assistant_tool_calls(
                None,
                vec![troupe_protocol::ToolCall::new(
                    "c1",
                    "weather",
                    r#"{"city":"Oslo"}"#,
                )],
            ),
            ChatMessage::tool_result("c1", "sunny"),
        ]);
        // A text answer is wanted: the call in prose, and the result asks for the answer.
        let rendered = render(&request, &Output::Text);
        assert_eq!(
            rendered[1].1,
            r#"I called the tool weather with {"city":"Oslo"}."#
        );
        assert_eq!(
            rendered[2],
            (
                "user".to_string(),
                "Result of weather:\nsunny\n\nNow answer the request using this result, in plain words."
                    .to_string()
            )
        );
        // Another call is wanted: the call as the JSON the grammar produces.
        let weather = ToolDefinition {
            name: "weather".into(),
            description: "Weather.".into(),
            parameters: json!({"type": "object"}),
        };
        let rendered = render(&request, &Output::ToolCall(vec![&weather]));
        assert_eq!(
            rendered[2].1,
            r#"{"name": "weather", "arguments": {"city":"Oslo"}}"#
        );
        assert_eq!(rendered[3].1, "Result of weather:\nsunny");
    }

    #[test]
    fn schema_has_one_branch_per_tool_and_hoists_definitions() {
        let a = tool(
            "move",
            json!({"type": "object", "properties": {"to": {"$ref": "#/$defs/Point"}},
                   "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}}}),
        );
        let b = tool("stop", json!({}));
        let schema = tool_call_schema(&[&a, &b]);
        assert_eq!(schema["oneOf"][0]["properties"]["name"]["const"], "move");
        assert_eq!(
            schema["oneOf"][1]["properties"]["arguments"]["type"],
            "object"
        );
        assert_eq!(
            schema["oneOf"][0]["properties"]["arguments"]["properties"]["to"]["$ref"],
            "#/$defs/t0_Point"
        );
        assert!(schema["$defs"]["t0_Point"].is_object());
    }

    #[test]
    fn parses_calls_and_rejects_unknown_tools() {
        let a = tool("add", json!({}));
        assert_eq!(
            parse_tool_call(r#" {"name": "add", "arguments": {"a": 1}} "#, &[&a]),
            Ok(("add".to_string(), r#"{"a":1}"#.to_string()))
        );
        assert!(parse_tool_call(r#"{"name": "sub", "arguments": {}}"#, &[&a]).is_err());
        assert!(parse_tool_call(r#"{"name": "add", "argu"#, &[&a]).is_err());
    }
}
