//! The schemas `server-everything` serves pass through the JSON Schema → GBNF converter
//! (`troupe_models::schema_to_grammar`, llama.cpp's ported), which the local model
//! (`troupe_models::LocalModel`) builds its tool-call grammar with —
//! so a local model can call them under the exact grammar, not the looser fallback.

use serde_json::{Value, json};
use troupe_mcp::RegisterMcp;
use troupe_tools::ToolRegistry;

use super::support::everything;

/// The tool-call schema the local model constrains sampling with (`prompt::tool_call_schema`
/// in `troupe-models`): one `oneOf` branch per tool, `{"name": {"const": NAME}, "arguments":
/// <parameters>}`. Its hoisting of `$defs` is not needed: the test checks there are none.
fn tool_call_schema(tools: &[troupe_protocol::ToolDefinition]) -> Value {
    let branches: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": tool.parameters},
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    json!({ "oneOf": branches })
}

#[tokio::test]
async fn everything_schemas_become_a_tool_call_grammar() {
    let Some(config) = everything() else { return };
    let mut registry = ToolRegistry::new();
    registry.register_mcp("everything", config).await.unwrap();
    let tools = registry.definitions();
    assert!(tools.len() >= 10, "{:?}", registry.names());
    for tool in &tools {
        let text = tool.parameters.to_string();
        assert!(
            !text.contains("\"$ref\"") && !text.contains("\"$defs\""),
            "{}: {text}",
            tool.name
        );
        let grammar = troupe_models::schema_to_grammar(&tool.parameters)
            .unwrap_or_else(|e| panic!("{}: {e}\n{text}", tool.name));
        assert!(grammar.contains("root"), "{}: {grammar}", tool.name);
    }
    let grammar = troupe_models::schema_to_grammar(&tool_call_schema(&tools))
        .unwrap_or_else(|e| panic!("{e}"));
    for tool in &tools {
        assert!(grammar.contains(&tool.name), "{} missing", tool.name);
    }
}
