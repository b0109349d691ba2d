//! The turn in troupe: a team with one `LlmAgent` (its model troupe's own `ScriptedModel`, one
//! tool registered with `ToolRegistry::register_fn`), asked with `Team::ask`.

use std::sync::Arc;

use troupe_agents::compression::CompressionConfig;
use troupe_agents::{AgentSpec, LlmAgent, TeamBuilderExt, shared_counter};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_runtime::Team;
use troupe_tools::{ToolError, ToolRegistry};

use crate::{FINAL_ANSWER, TOOL_ARGUMENTS, TOOL_NAME, USER_MESSAGE, WeatherArgs, weather};

/// The agent's name in the team.
const AGENT: &str = "assistant";

/// A running team with its compression agent and one LLM agent, as a program would start it.
pub struct TroupeTurn {
    team: Team,
    model: Arc<ScriptedModel>,
}

impl TroupeTurn {
    /// Start the team.
    pub async fn start() -> Self {
        let model = Arc::new(ScriptedModel::new("scripted", []));
        let mut tools = ToolRegistry::new();
        tools
            .register_fn(
                TOOL_NAME,
                "The weather in a city.",
                |args: WeatherArgs| async move { Ok::<String, ToolError>(weather(&args)) },
            )
            .expect("a valid tool");
        let spec = AgentSpec::new(AGENT, model.clone())
            .instructions("You answer questions about the weather.")
            .tools(tools);
        let team = Team::builder()
            .compression(CompressionConfig::new(shared_counter()))
            .agent(spec)
            .start()
            .await
            .expect("a team");
        TroupeTurn { team, model }
    }

    /// Script the model for `turns` more turns: a tool call, then the final answer, each.
    pub fn script(&self, turns: u64) {
        for _ in 0..turns {
            self.model.push([
                ScriptedReply::call(TOOL_NAME, TOOL_ARGUMENTS),
                ScriptedReply::text(FINAL_ANSWER),
            ]);
        }
    }

    /// One turn: ask the agent and wait for its final answer.
    pub async fn turn(&self) -> String {
        self.team.ask(AGENT, USER_MESSAGE).await.expect("an answer")
    }

    /// Empty the agent's conversation again (untimed between turns), so every turn starts from
    /// the system prompt alone, as rig's and the ractor actor's do.
    pub async fn reset(&self) {
        self.team
            .agent::<LlmAgent>(AGENT)
            .clear()
            .await
            .expect("cleared");
    }

    /// Stop the team.
    pub async fn shutdown(self) {
        self.team.shutdown().await;
    }
}
