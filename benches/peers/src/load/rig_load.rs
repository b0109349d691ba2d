//! The requests in rig 0.44, as its README builds an agent: rig-core's OpenAI client (the Chat
//! Completions model, pointed at the server with `with_base_url`), `rig-agent`'s
//! `AgentBuilder` with the two tools, and each request a streamed prompt
//! (`agent.prompt(…).max_turns(2).stream()`) read to its final response. One agent serves every
//! request: rig's agents keep no conversation between prompts.

use std::convert::Infallible;

use futures::StreamExt;
use rig_agent::agent::MultiTurnStreamItem;
use rig_agent::tool::{Tool, ToolContext};
use rig_agent::{Agent, AgentBuilder};
use rig_core::providers::openai::OpenAIConfig;

use super::{
    CityArgs, FINAL_ANSWER, MODEL, SYSTEM_PROMPT, TIME_TOOL, USER_MESSAGE, WEATHER_TOOL,
    city_schema, local_time, weather,
};

/// `weather` as rig's `Tool`.
pub struct WeatherTool;

impl Tool for WeatherTool {
    const NAME: &'static str = WEATHER_TOOL;
    type Args = CityArgs;
    type Output = String;
    type Error = Infallible;

    fn description(&self) -> String {
        "The weather in a city.".to_string()
    }

    fn parameters(&self) -> serde_json::Value {
        city_schema()
    }

    async fn call(&self, _context: &mut ToolContext, args: CityArgs) -> Result<String, Infallible> {
        Ok(weather(&args.city))
    }
}

/// `local_time` as rig's `Tool`.
pub struct TimeTool;

impl Tool for TimeTool {
    const NAME: &'static str = TIME_TOOL;
    type Args = CityArgs;
    type Output = String;
    type Error = Infallible;

    fn description(&self) -> String {
        "The local time in a city.".to_string()
    }

    fn parameters(&self) -> serde_json::Value {
        city_schema()
    }

    async fn call(&self, _context: &mut ToolContext, args: CityArgs) -> Result<String, Infallible> {
        Ok(local_time(&args.city))
    }
}

/// The agent every request prompts.
pub struct RigLoad {
    agent: Agent,
}

impl RigLoad {
    /// The client and the agent.
    pub fn start(base_url: &str) -> Self {
        let model = OpenAIConfig::new("load-key")
            .with_base_url(base_url)
            .client()
            .chat(MODEL);
        let agent = AgentBuilder::new(model)
            .preamble(SYSTEM_PROMPT)
            .tool(WeatherTool)
            .tool(TimeTool)
            .build();
        RigLoad { agent }
    }

    /// One request: stream the prompt's run to its final response.
    pub async fn request(&self) -> Result<(), String> {
        let mut stream = self.agent.prompt(USER_MESSAGE).max_turns(2).stream();
        while let Some(item) = stream.next().await {
            match item {
                Ok(MultiTurnStreamItem::FinalResponse(response)) => {
                    let answer = response.output();
                    return if answer == FINAL_ANSWER {
                        Ok(())
                    } else {
                        Err(format!("unexpected answer: {answer}"))
                    };
                }
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("the stream ended without a final response".into())
    }
}
