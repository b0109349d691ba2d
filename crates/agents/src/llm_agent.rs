//! [`LlmAgent`]: the turn loop of an agent backed by a chat model.
//!
//! One request: the request becomes a user message; then model call → tool calls → tool results
//! → model call … until the model answers without tool calls (the final answer) or `max_turns`
//! model calls have been made.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use futures::future::join_all;
use tracing::Instrument;
use troupe_runtime::trace::semconv;
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, ChatMessage, ChatRequest,
    Checkpoint, Conversation, Event, ToolCall,
};
use troupe_tools::{FileLedger, SharedLedger, ToolContext, ToolRegistry, ToolResult};

use crate::spec::AgentSpec;
use crate::team_tools::{AskAgentTool, TeamLink};

/// An agent whose answers come from a [`troupe_runtime::ChatModel`] and its tools.
pub struct LlmAgent {
    spec: AgentSpec,
    tools: ToolRegistry,
    conversation: Conversation,
    ledger: SharedLedger,
    link: TeamLink,
}

/// What an [`LlmAgent`] keeps across restarts beyond its conversation.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct AgentState {
    ledger: FileLedger,
}

impl LlmAgent {
    /// A fresh agent, or one restored from a checkpoint.
    pub fn new(spec: AgentSpec, checkpoint: Option<Checkpoint>) -> Result<Self, AgentError> {
        let link = TeamLink::default();
        let mut tools = spec.tools.clone();
        if spec.team_messaging {
            tools
                .register(AskAgentTool { link: link.clone() })
                .map_err(|e| AgentError::Failed(e.to_string()))?;
        }
        let (conversation, state) = match checkpoint {
            Some(c) => {
                let state: AgentState = serde_json::from_value(c.state).unwrap_or_default();
                (c.conversation, state)
            }
            None => (Conversation::new(), AgentState::default()),
        };
        Ok(LlmAgent { spec, tools, conversation, ledger: SharedLedger::from_ledger(state.ledger), link })
    }

    /// A factory the supervisor uses to build (and rebuild) this agent.
    pub fn factory(spec: AgentSpec) -> BehaviorFactory {
        Arc::new(move |checkpoint| Ok(Box::new(LlmAgent::new(spec.clone(), checkpoint)?) as Box<dyn AgentBehavior>))
    }

    /// The conversation so far.
    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    /// The file ledger of this agent's tool calls.
    pub fn ledger(&self) -> FileLedger {
        self.ledger.snapshot()
    }

    /// The tools this agent can call.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Register a tool while the agent runs (between requests); a duplicate name is an error.
    pub fn tools_mut(&mut self) -> &mut ToolRegistry {
        &mut self.tools
    }

    fn start_request(&mut self, request: &AgentRequest) {
        if self.conversation.is_empty() && !self.spec.instructions.is_empty() {
            self.conversation.push(ChatMessage::system(self.spec.instructions.clone()));
        }
        let text = match &request.from {
            Some(from) => format!("[message from agent `{from}`]\n{}", request.text),
            None => request.text.clone(),
        };
        self.conversation.push(ChatMessage::user(text));
    }

    async fn call_model(&self, ctx: &AgentContext, trace_id: &str) -> Result<ChatMessage, AgentError> {
        let info = self.spec.model.info();
        let request = ChatRequest {
            messages: self.conversation.messages().to_vec(),
            tools: self.tools.definitions(),
            temperature: self.spec.temperature,
            max_tokens: self.spec.max_tokens,
            ..ChatRequest::default()
        };
        ctx.events.publish(
            Some(trace_id.to_string()),
            Event::ModelCallStarted { agent: ctx.name.clone(), model: info.name.clone(), messages: request.messages.len() },
        );
        let span = tracing::info_span!(
            "chat",
            { semconv::OPERATION_NAME } = "chat",
            { semconv::REQUEST_MODEL } = %info.name,
            { semconv::AGENT_NAME } = %ctx.name,
            { semconv::USAGE_INPUT_TOKENS } = tracing::field::Empty,
            { semconv::USAGE_OUTPUT_TOKENS } = tracing::field::Empty,
        );
        let started = Instant::now();
        let result = self.spec.model.chat(request).instrument(span.clone()).await;
        let ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(response) => {
                span.record(semconv::USAGE_INPUT_TOKENS, response.usage.input_tokens);
                span.record(semconv::USAGE_OUTPUT_TOKENS, response.usage.output_tokens);
                ctx.events.publish(
                    Some(trace_id.to_string()),
                    Event::ModelCallFinished {
                        agent: ctx.name.clone(),
                        model: info.name,
                        input_tokens: response.usage.input_tokens,
                        output_tokens: response.usage.output_tokens,
                        ms,
                        error: None,
                    },
                );
                Ok(response.message)
            }
            Err(e) => {
                tracing::warn!(parent: &span, error = %e, "model call failed");
                ctx.events.publish(
                    Some(trace_id.to_string()),
                    Event::ModelCallFinished {
                        agent: ctx.name.clone(),
                        model: info.name,
                        input_tokens: 0,
                        output_tokens: 0,
                        ms,
                        error: Some(e.to_string()),
                    },
                );
                Err(AgentError::Model(e.to_string()))
            }
        }
    }

    /// Run one assistant message's tool calls concurrently; results come back in call order.
    async fn run_tools(&self, calls: &[ToolCall], ctx: &AgentContext, trace_id: &str) -> Vec<ToolResult> {
        let base = ToolContext::new(ctx.name.clone(), self.spec.workspace_root.clone())
            .with_events(ctx.events.clone())
            .with_ledger(self.ledger.clone())
            .with_trace_id(Some(trace_id.to_string()));
        let runs = calls.iter().map(|call| {
            let span = tracing::info_span!(
                "execute_tool",
                { semconv::OPERATION_NAME } = "execute_tool",
                { semconv::TOOL_NAME } = %call.function.name,
                { semconv::TOOL_CALL_ID } = %call.id,
                { semconv::AGENT_NAME } = %ctx.name,
            );
            let tool_ctx = base.clone().with_tool_call_id(call.id.clone());
            async move { self.tools.dispatch(call, &tool_ctx).await }.instrument(span)
        });
        join_all(runs).await
    }

    async fn run_turns(&mut self, ctx: &AgentContext, trace_id: &str) -> Result<(String, u32), AgentError> {
        for turn in 1..=self.spec.max_turns {
            let reply = self.call_model(ctx, trace_id).await?;
            let calls = reply.calls().to_vec();
            let text = reply.text();
            self.conversation.push(reply);
            if calls.is_empty() {
                return Ok((text, turn));
            }
            let results = self.run_tools(&calls, ctx, trace_id).await;
            let mut fatal = None;
            for (call, result) in calls.iter().zip(results) {
                if let troupe_tools::ToolOutcome::Fatal(reason) = &result.outcome {
                    fatal.get_or_insert_with(|| format!("tool `{}` failed fatally: {reason}", call.function.name));
                }
                // Every call gets its result, fatal or not, so the conversation stays valid.
                self.conversation.push(ChatMessage::tool_result(call.id.clone(), result.content));
            }
            if let Some(reason) = fatal {
                return Err(AgentError::Failed(reason));
            }
        }
        Err(AgentError::MaxTurns(self.spec.max_turns))
    }
}

#[async_trait]
impl AgentBehavior for LlmAgent {
    async fn handle(&mut self, request: AgentRequest, ctx: &AgentContext) -> Result<String, AgentError> {
        let trace_id = request.trace.trace_id_hex();
        self.link.set(ctx.directory.clone(), request.trace);
        let before = self.conversation.clone();
        ctx.events.publish(Some(trace_id.clone()), Event::TurnStarted { agent: ctx.name.clone() });
        self.start_request(&request);
        let outcome = self.run_turns(ctx, &trace_id).await;
        let (model_calls, error) = match &outcome {
            Ok((_, turns)) => (*turns, None),
            Err(e) => (0, Some(e.to_string())),
        };
        if let Err(AgentError::Model(_)) = &outcome {
            // A provider fault loses nothing and adds nothing: the caller may simply retry.
            self.conversation = before;
        }
        ctx.events.publish(
            Some(trace_id),
            Event::TurnFinished { agent: ctx.name.clone(), model_calls, error },
        );
        outcome.map(|(text, _)| text)
    }

    fn checkpoint(&self) -> Checkpoint {
        let state = AgentState { ledger: self.ledger.snapshot() };
        Checkpoint {
            conversation: self.conversation.clone(),
            state: serde_json::to_value(state).unwrap_or_default(),
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
