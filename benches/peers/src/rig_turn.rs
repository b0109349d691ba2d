//! The turn in rig: an `Agent` over rig's own `MockCompletionModel` with one tool, prompted with
//! `max_turns(2)` so it runs the tool and answers.

use std::convert::Infallible;

use rig_agent::tool::{Tool, ToolContext};
use rig_agent::{Agent, AgentBuilder};
use rig_core::test_utils::{MockCompletionModel, MockTurn};

use crate::{FINAL_ANSWER, TOOL_ARGUMENTS, TOOL_NAME, USER_MESSAGE, WeatherArgs, weather};

/// The tool, as rig's `Tool`.
pub struct WeatherTool;

impl Tool for WeatherTool {
    const NAME: &'static str = TOOL_NAME;
    type Args = WeatherArgs;
    type Output = String;
    type Error = Infallible;

    fn description(&self) -> String {
        "The weather in a city.".to_string()
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": { "city": { "type": "string", "description": "The city to look up." } },
            "required": ["city"],
        })
    }

    async fn call(
        &self,
        _context: &mut ToolContext,
        args: WeatherArgs,
    ) -> Result<String, Infallible> {
        Ok(weather(&args))
    }
}

/// An agent whose mock model is scripted for `turns` turns (the mock has no way to add turns
/// later, so a benchmark builds one per batch, untimed).
pub fn agent(turns: u64) -> Agent {
    let arguments: serde_json::Value =
        serde_json::from_str(TOOL_ARGUMENTS).expect("valid arguments");
    let model = MockCompletionModel::from_turns((0..turns).flat_map(|_| {
        [
            MockTurn::tool_call("call_1", TOOL_NAME, arguments.clone()),
            MockTurn::text(FINAL_ANSWER),
        ]
    }));
    AgentBuilder::new(model)
        .preamble("You answer questions about the weather.")
        .tool(WeatherTool)
        .build()
}

/// One turn: prompt the agent (two model calls allowed) and return its final answer.
pub async fn turn(agent: &Agent) -> String {
    agent
        .prompt(USER_MESSAGE)
        .max_turns(2)
        .await
        .expect("an answer")
        .output()
}
