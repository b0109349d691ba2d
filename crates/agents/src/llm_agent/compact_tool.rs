//! The `compact` tool an agent may call on itself (`CompactionSettings::agent_tool`): its
//! definition (schema derived from [`CompactArgs`]) and how its call is answered.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_protocol::{MessageId, ToolCall, ToolDefinition};
use troupe_runtime::AgentContext;
use troupe_tools::schema::parameters_schema;
use troupe_tools::{ToolFailure, ToolResult, observe_call};

use super::LlmAgent;
use super::request::RequestContext;
use super::tool_span::in_tool_span;
use troupe_protocol::CompactTrigger;

/// The name of the agent-callable compaction tool.
pub const COMPACT_TOOL: &str = "compact";

/// The `compact` tool's arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompactArgs {
    /// What the summary must keep (e.g. "the parser's open bugs").
    focus: Option<String>,
}

/// The focus a `compact` call asks for; arguments that do not parse ask for none (the call
/// still compacts: the model asked to, and a focus is only a hint).
fn compact_focus(call: &ToolCall) -> Option<String> {
    serde_json::from_str::<CompactArgs>(&call.function.arguments)
        .ok()
        .and_then(|args| args.focus)
}

/// The `compact` tool's parameter schema, derived once (it is offered on every model call).
fn compact_schema() -> &'static serde_json::Value {
    static SCHEMA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(parameters_schema::<CompactArgs>)
}

impl LlmAgent {
    /// The tools the model is offered: the registry's, plus `compact` when enabled and
    /// `recall` once something is archived (`recall_tool.rs`).
    pub(super) fn tool_definitions(&self) -> Vec<ToolDefinition> {
        let mut definitions = self.tools.definitions();
        if self.spec.compaction.agent_tool {
            definitions.push(ToolDefinition {
                name: COMPACT_TOOL.into(),
                description: "Compact your own conversation when it has grown long; optional \
                              `focus` says what the summary must keep."
                    .into(),
                parameters: compact_schema().clone(),
            });
        }
        definitions.extend(self.recall_definition());
        definitions
    }

    /// Run the compaction a `compact` call asked for and put its outcome in the call's result
    /// message `result_id` (already in place, so compaction sees every call answered). Like
    /// every tool call, it runs in its `execute_tool` span between its tool-call events.
    pub(super) async fn answer_compact_tool(
        &mut self,
        result_id: MessageId,
        call: &ToolCall,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) {
        let tool_ctx = self
            .tool_context(ctx, req.trace.id())
            .with_tool_call_id(call.id.clone());
        let serve = async {
            let result = match self
                .compact(CompactTrigger::AgentTool, compact_focus(call), ctx, req)
                .await
            {
                Ok(outcome) if outcome.report.no_compaction_needed => {
                    ToolResult::success("no compaction needed")
                }
                Ok(outcome) => {
                    ToolResult::success(outcome.summary.unwrap_or(outcome.report.reason))
                }
                Err(e) => {
                    ToolResult::error(ToolFailure::Refused, format!("compaction did not run: {e}"))
                }
            };
            req.keep_for_rollback(&self.context.conversation);
            result
        };
        let result = in_tool_span(call, &ctx.name, observe_call(call, &tool_ctx, serve)).await;
        if let Some(message) = self.context.conversation.get_mut(result_id) {
            message.set_text(result.content);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_derived_from_the_arguments_with_their_docs() {
        assert_eq!(
            parameters_schema::<CompactArgs>(),
            serde_json::json!({
                "type": "object",
                "properties": {"focus": {
                    "type": ["string", "null"],
                    "description": "What the summary must keep (e.g. \"the parser's open bugs\")."
                }},
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn a_focus_is_read_and_bad_arguments_ask_for_none() {
        let call = |args: &str| ToolCall::new("c1", COMPACT_TOOL, args);
        assert_eq!(
            compact_focus(&call(r#"{"focus":"parser"}"#)).as_deref(),
            Some("parser")
        );
        assert_eq!(compact_focus(&call("{}")), None);
        assert_eq!(compact_focus(&call("not json")), None);
    }
}
