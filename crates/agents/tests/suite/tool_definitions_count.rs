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

/// A counter that records each exact count it is asked for; its bound is the text's bytes (as
/// the BPE counters' is).
#[derive(Default)]
struct Watched {
    exact: std::sync::atomic::AtomicUsize,
}

impl troupe_tokens::TokenCounter for Watched {
    fn name(&self) -> &str {
        "watched"
    }

    fn count(&self, text: &str) -> usize {
        self.exact
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        text.len().div_ceil(4)
    }

    fn count_upper_bound(&self, text: &str) -> Option<usize> {
        Some(text.len())
    }
}

/// Far below every threshold, a request with a system prompt, tools, a tool call and its result
/// tokenizes nothing — neither the messages nor the tool definitions: bounds decide every check
/// (so a team that stays there never builds a BPE vocabulary). Near the window the same
/// definitions are counted exactly.
#[tokio::test]
async fn far_below_every_threshold_a_request_with_tools_tokenizes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let watched = Arc::new(Watched::default());
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("read_file", r#"{"path": "a.txt"}"#),
            ScriptedReply::text("it says alpha"),
        ],
    ));
    let spec = AgentSpec::new("reader", model)
        .instructions("You read files and say what they hold.")
        .tools(ToolRegistry::with_file_tools())
        .workspace_root(dir.path())
        .compaction(CompactionSettings {
            policy: Some(ContextPolicy::for_window(128_000)),
            counter: Some(watched.clone()),
            ..CompactionSettings::default()
        });
    spawn_agent(&team, spec).await.unwrap();
    assert_eq!(
        team.ask("reader", "what does a.txt say?").await.unwrap(),
        "it says alpha"
    );
    assert_eq!(
        watched.exact.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "a check far below its threshold tokenized"
    );
    // Asked for (`/context`), the count is exact: the definitions are tokenized then.
    let stats = team
        .agent::<LlmAgent>("reader")
        .context_stats()
        .await
        .unwrap();
    assert!(stats.tool_tokens > 0);
    assert!(watched.exact.load(std::sync::atomic::Ordering::Relaxed) > 0);
    team.shutdown().await;
}
