//! The requests in AutoAgents 0.4, as its README and its own benchmark
//! (liquidos-ai/autoagents-bench) build them: one `LLMBuilder::<OpenAI>` client shared by
//! every agent, and per request a `ReActAgent` in a `DirectAgent` with its own
//! `SlidingWindowMemory`, the tools derived with `#[tool]`. Streaming: the agent is built with
//! `stream(true)` and run with `run_stream`, read to its last item (the final response). The
//! client speaks Chat Completions (`OpenAIApiMode::ChatCompletions`; its default is the
//! Responses API, which the server, like most OpenAI-compatible servers, does not serve).

use std::sync::Arc;

use autoagents::async_trait;
use autoagents::core::agent::memory::SlidingWindowMemory;
use autoagents::core::agent::prebuilt::executor::ReActAgent;
use autoagents::core::agent::task::Task;
use autoagents::core::agent::{AgentBuilder, DirectAgent, DirectAgentHandle};
use autoagents::core::tool::{ToolCallError, ToolRuntime, ToolT};
use autoagents::llm::LLMProvider;
use autoagents::llm::backends::openai::{OpenAI, OpenAIApiMode};
use autoagents::llm::builder::LLMBuilder;
use autoagents_derive::{AgentHooks, ToolInput, agent, tool};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{FINAL_ANSWER, MODEL, USER_MESSAGE, local_time, weather};

/// Both tools' arguments, derived as AutoAgents' README does.
#[derive(Serialize, Deserialize, ToolInput, Debug)]
pub struct CityInput {
    #[input(description = "The city to look up.")]
    city: String,
}

#[tool(name = "weather", description = "The weather in a city.", input = CityInput)]
#[derive(Default)]
pub struct WeatherTool {}

#[async_trait]
impl ToolRuntime for WeatherTool {
    async fn execute(&self, args: Value) -> Result<Value, ToolCallError> {
        let args: CityInput = serde_json::from_value(args)?;
        Ok(Value::String(weather(&args.city)))
    }
}

#[tool(name = "local_time", description = "The local time in a city.", input = CityInput)]
#[derive(Default)]
pub struct TimeTool {}

#[async_trait]
impl ToolRuntime for TimeTool {
    async fn execute(&self, args: Value) -> Result<Value, ToolCallError> {
        let args: CityInput = serde_json::from_value(args)?;
        Ok(Value::String(local_time(&args.city)))
    }
}

#[agent(
    name = "weather_agent",
    description = "You answer questions about the weather and the time of a city.",
    tools = [WeatherTool, TimeTool],
)]
#[derive(Default, Clone, AgentHooks)]
pub struct WeatherAgent {}

type Handle = DirectAgentHandle<ReActAgent<WeatherAgent>>;

/// The shared client and the agents of the measured requests.
pub struct AutoAgentsLoad {
    llm: Arc<dyn LLMProvider>,
    agents: Vec<Handle>,
}

impl AutoAgentsLoad {
    /// The client, and the agent of the first request.
    pub async fn start(base_url: &str) -> Self {
        let llm: Arc<OpenAI> = LLMBuilder::<OpenAI>::new()
            .api_key("load-key")
            .base_url(base_url)
            .model(MODEL)
            .api_mode(OpenAIApiMode::ChatCompletions)
            .build()
            .expect("an AutoAgents OpenAI client");
        let mut load = AutoAgentsLoad {
            llm,
            agents: Vec::new(),
        };
        let first = load.agent().await;
        load.agents.push(first);
        load
    }

    async fn agent(&self) -> Handle {
        AgentBuilder::<_, DirectAgent>::new(ReActAgent::new(WeatherAgent {}))
            .llm(self.llm.clone())
            .memory(Box::new(SlidingWindowMemory::new(10)))
            .stream(true)
            .build()
            .await
            .expect("an agent")
    }

    /// One agent per measured request (`1..=n`).
    pub async fn prepare(&mut self, n: usize) {
        for _ in 0..n {
            let agent = self.agent().await;
            self.agents.push(agent);
        }
    }

    /// Request `i`: run agent `i`'s stream to its last item.
    pub async fn request(&self, i: usize) -> Result<(), String> {
        let mut stream = self.agents[i]
            .agent
            .run_stream(Task::new(USER_MESSAGE))
            .await
            .map_err(|e| e.to_string())?;
        let mut last = None;
        while let Some(item) = stream.next().await {
            last = Some(item.map_err(|e| e.to_string())?);
        }
        match last {
            Some(answer) if answer == FINAL_ANSWER => Ok(()),
            other => Err(format!("unexpected answer: {other:?}")),
        }
    }
}
