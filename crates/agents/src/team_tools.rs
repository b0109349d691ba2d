//! `ask_agent`: the tool through which an LLM agent talks to its teammates by name.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use troupe_protocol::{TraceContext, sync};
use troupe_runtime::{AgentRequest, Directory};
use troupe_tools::{Tool, ToolContext, ToolError};

/// How long one `ask_agent` call waits for the teammate's answer.
pub const ASK_AGENT_TIMEOUT: Duration = Duration::from_secs(240);

/// The team an agent belongs to and the trace of the request it is handling.
///
/// Set by the agent at the start of every request: an agent handles one request at a time, so
/// the tool always sees the current request's trace.
#[derive(Debug, Clone, Default)]
pub(crate) struct TeamLink(Arc<Mutex<Option<(Directory, TraceContext)>>>);

impl TeamLink {
    pub(crate) fn set(&self, directory: Directory, trace: TraceContext) {
        *sync::lock(&self.0) = Some((directory, trace));
    }

    fn get(&self) -> Option<(Directory, TraceContext)> {
        sync::lock(&self.0).clone()
    }
}

/// Arguments of `ask_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskAgentArgs {
    /// The teammate's name.
    pub agent: String,
    /// What to ask them.
    pub message: String,
}

/// Ask a teammate by name and wait for the answer.
pub(crate) struct AskAgentTool {
    pub(crate) link: TeamLink,
}

#[async_trait]
impl Tool for AskAgentTool {
    type Args = AskAgentArgs;
    type Output = String;

    fn name(&self) -> &str {
        "ask_agent"
    }

    fn description(&self) -> &str {
        "Ask another agent of your team a question by name and get its answer."
    }

    fn timeout(&self) -> Option<Duration> {
        Some(ASK_AGENT_TIMEOUT + Duration::from_secs(5))
    }

    async fn call(&self, ctx: &ToolContext, args: AskAgentArgs) -> Result<String, ToolError> {
        if args.agent == ctx.agent {
            return Err(ToolError::respond(format!(
                "`{}` is you: ask a different agent (asking yourself would wait forever)",
                args.agent
            )));
        }
        let Some((directory, trace)) = self.link.get() else {
            return Err(ToolError::respond("this agent is not part of a team"));
        };
        let request = AgentRequest {
            from: Some(ctx.agent.clone()),
            text: args.message,
            trace: trace.child(),
            // Another agent asks in words; a typed ask is the program's (Team::ask_typed).
            response_format: None,
            request_id: None,
        };
        directory
            .ask(&args.agent, request, ASK_AGENT_TIMEOUT)
            .await
            .map_err(|e| ToolError::respond(e.to_string()))
    }
}
