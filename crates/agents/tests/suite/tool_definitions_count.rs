//! Tool definitions count against the usable window: a request carries them.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use troupe_agents::compression::CompressionConfig;
use troupe_agents::{
    AgentSpec, CompactionSettings, LlmAgent, shared_counter, spawn_agent, spawn_compression_agent,
};
use troupe_compaction::ContextPolicy;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::Event;
use troupe_runtime::{Team, TeamConfig};
use troupe_tools::{JsonTool, ToolContext, ToolError, ToolRegistry};

/// A tool whose schema has `fields` described properties.
struct Wide {
    parameters: Value,
}

impl Wide {
    fn new(fields: usize) -> Self {
        let properties: Map<String, Value> = (0..fields)
            .map(|i| {
                let field = json!({
                    "type": "string",
                    "description": format!("field number {i} of the record, as written on the form"),
                });
                (format!("field_{i}"), field)
            })
            .collect();
        Wide {
            parameters: json!({"type": "object", "properties": properties}),
        }
    }
}

#[async_trait::async_trait]
impl JsonTool for Wide {
    fn name(&self) -> &str {
        "fill_form"
    }

    fn description(&self) -> &str {
        "Fill in the form."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    async fn call(
        &self,
        _ctx: &ToolContext,
        _args: Map<String, Value>,
    ) -> Result<String, ToolError> {
        Ok("filled".to_string())
    }
}

#[tokio::test]
async fn a_big_tool_schema_uses_budget_before_any_message_and_is_warned_about() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_compression_agent(&team, CompressionConfig::new(shared_counter()))
        .await
        .unwrap();
    let mut events = team.subscribe();
    let mut tools = ToolRegistry::new();
    tools.register_json(Wide::new(200)).unwrap();
    let model = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("done")]));
    let spec = AgentSpec::new("filler", model)
        .tools(tools)
        .compaction(CompactionSettings {
            policy: Some(ContextPolicy::for_window(10_000)),
            ..CompactionSettings::default()
        });
    spawn_agent(&team, spec).await.unwrap();

    // No message yet (the reply's priming only); the tools alone pass compaction's target (40 %
    // of the usable window: 3,000 of 10,000 less 2,500 for the answer), and below the warning
    // (70 %) only the tools' own warning goes out.
    let stats = team
        .agent::<LlmAgent>("filler")
        .context_stats()
        .await
        .unwrap();
    assert!(stats.tool_tokens > 3_200, "{stats:?}");
    assert!(
        stats.tokens >= stats.tool_tokens && stats.tokens < stats.tool_tokens + 10,
        "{stats:?}"
    );
    assert!(stats.percent > 40, "{stats:?}");

    assert_eq!(team.ask("filler", "fill it").await.unwrap(), "done");
    let mut warnings = 0;
    while let Ok(record) = events.try_recv() {
        if let Event::ContextWarning { tokens, .. } = record.event {
            assert!(tokens >= stats.tool_tokens);
            warnings += 1;
        }
    }
    assert_eq!(
        warnings, 1,
        "one warning for the tools, before the model call"
    );
    team.shutdown().await;
}
