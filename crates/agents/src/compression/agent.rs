//! [`CompressionAgent`]: the dedicated agent that shrinks conversations to their target.
//!
//! It runs a model tool loop over the four compression tools until `verify_compression_target`
//! says the target is reached or an iteration bound is hit. Whatever the model does — a weak
//! model, an invalid plan, an error — the deterministic planner then finishes the job, so the
//! target is met whenever it is reachable. Every result is validated by the compaction crate.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;
use troupe_compaction::{
    CompactOptions, CompactTrigger, CompactionSession, MechanicalSummarizer, Summarizer,
    ThrashGuard, TokenCounter,
};
use troupe_runtime::trace::{self, semconv};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, ChatMessage, ChatModel,
    ChatRequest, Checkpoint, Event, Job, ToolChoice,
};

use crate::compression::job::{CompactionJob, CompactionResult};
use crate::compression::summarizer::ModelSummarizer;
use crate::compression::tools;

/// The name the compression agent has in every team.
pub const COMPRESSION_AGENT: &str = "compressor";

/// Model tool-loop iterations before the deterministic planner takes over.
pub const DEFAULT_MAX_ITERATIONS: u32 = 6;

const SYSTEM_PROMPT: &str = include_str!("prompt.md");

/// How the compression agent is set up.
#[derive(Clone)]
pub struct CompressionConfig {
    /// The compaction model; `None` uses the requesting agent's own model.
    pub model: Option<Arc<dyn ChatModel>>,
    /// Whether to use any model at all (`false`: tiers 1–2 and mechanical summaries only).
    pub use_model: bool,
    /// Token counter for budgets.
    pub counter: Arc<dyn TokenCounter>,
    /// Model tool-loop iterations before the deterministic planner finishes.
    pub max_iterations: u32,
}

impl CompressionConfig {
    /// Use `counter`, the requesting agent's model, and the default iteration bound.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        CompressionConfig {
            model: None,
            use_model: true,
            counter,
            max_iterations: DEFAULT_MAX_ITERATIONS,
        }
    }
}

/// The compression agent's behaviour.
pub struct CompressionAgent {
    config: CompressionConfig,
    /// Anti-thrash memory per conversation: automatic triggers wait for enough new tokens.
    guards: HashMap<String, ThrashGuard>,
}

impl CompressionAgent {
    /// A compression agent.
    pub fn new(config: CompressionConfig) -> Self {
        CompressionAgent {
            config,
            guards: HashMap::new(),
        }
    }

    /// The factory the supervisor uses to (re)build it.
    pub fn factory(config: CompressionConfig) -> BehaviorFactory {
        Arc::new(move |_checkpoint| {
            Ok(Box::new(CompressionAgent::new(config.clone())) as Box<dyn AgentBehavior>)
        })
    }

    async fn compact(&mut self, job: CompactionJob, ctx: &AgentContext) -> CompactionResult {
        let model = if self.config.use_model {
            self.config.model.clone().or(job.agent_model.clone())
        } else {
            None
        };
        let model_summarizer = model.clone().map(ModelSummarizer::new);
        let mechanical = MechanicalSummarizer::new();
        let summarizer: &dyn Summarizer = match &model_summarizer {
            Some(s) => s,
            None => &mechanical,
        };
        let options = CompactOptions {
            instructions: job.instructions.clone(),
            trigger: job.trigger,
            guard: self.guards.get(&job.agent).cloned(),
            ..CompactOptions::default()
        };
        let counter = self.config.counter.clone();
        let mut session = CompactionSession::new(
            &job.conversation,
            &job.ledger,
            &job.policy,
            counter.as_ref(),
            options,
        )
        .map_err(|e| e.to_string())?;
        let before = session.verify_target().current;
        if before > session.verify_target().target {
            ctx.events.publish(
                None,
                Event::CompactionStarted {
                    agent: job.agent.clone(),
                    tokens: before,
                    trigger: trigger_name(job.trigger).into(),
                },
            );
            if let Some(model) = &model {
                self.model_loop(model.as_ref(), &mut session, summarizer, &job.agent, ctx)
                    .await;
            }
            if !session.verify_target().reached {
                // Whatever the model did, the planner finishes: the target is met when reachable.
                session.finish_deterministically(Some(summarizer)).await;
            }
        }
        match session.finish() {
            Ok(mut compaction) => {
                if let Some(s) = &model_summarizer {
                    compaction.report.fallbacks.extend(s.take_fallbacks());
                }
                self.guards
                    .entry(job.agent.clone())
                    .or_default()
                    .record(&compaction.report);
                let report = serde_json::to_value(&compaction.report).unwrap_or_default();
                ctx.events.publish(
                    None,
                    Event::CompactionFinished {
                        agent: job.agent.clone(),
                        report,
                    },
                );
                Ok(compaction)
            }
            Err(e) => {
                ctx.events.publish(
                    None,
                    Event::CompactionFailed {
                        agent: job.agent.clone(),
                        reason: e.to_string(),
                    },
                );
                Err(e.to_string())
            }
        }
    }

    async fn model_loop(
        &self,
        model: &dyn ChatModel,
        session: &mut CompactionSession<'_>,
        summarizer: &dyn Summarizer,
        agent: &str,
        ctx: &AgentContext,
    ) {
        let mut messages = vec![
            ChatMessage::system(SYSTEM_PROMPT),
            ChatMessage::user(format!(
                "Compress the conversation of agent `{agent}` to its target. Metadata:\n{}",
                tools::condensed_metadata(&session.metadata())
            )),
        ];
        let opening = messages.len();
        let mut reached_before = false;
        for iteration in 1..=self.config.max_iterations {
            let request = ChatRequest {
                messages: messages.clone(),
                tools: tools::definitions(),
                tool_choice: ToolChoice::Required,
                temperature: Some(0.0),
                max_tokens: Some(256),
            };
            let reply = match model.chat(request).await {
                Ok(r) => r.message,
                Err(e) => {
                    tracing::warn!(error = %e, "compression model failed; the planner finishes");
                    return;
                }
            };
            let calls = reply.calls().to_vec();
            if calls.is_empty() {
                return;
            }
            messages.push(reply);
            let mut verified = false;
            for call in &calls {
                let span = tracing::info_span!(
                    "execute_tool",
                    { semconv::OPERATION_NAME } = "execute_tool",
                    { semconv::TOOL_NAME } = %call.function.name,
                    { semconv::TOOL_CALL_ID } = %call.id,
                    { semconv::TOOL_CALL_ARGUMENTS } = tracing::field::Empty,
                    { semconv::TOOL_CALL_RESULT } = tracing::field::Empty,
                );
                let record_content = trace::record_content();
                if record_content {
                    span.record(
                        semconv::TOOL_CALL_ARGUMENTS,
                        call.function.arguments.as_str(),
                    );
                }
                let result = tools::execute(call, session, summarizer)
                    .instrument(span.clone())
                    .await;
                if record_content {
                    span.record(semconv::TOOL_CALL_RESULT, result.content.as_str());
                }
                messages.push(ChatMessage::tool_result(call.id.clone(), result.content));
                verified |= call.function.name == tools::VERIFY_TARGET;
            }
            let status = session.verify_target();
            ctx.events.publish(
                None,
                Event::CompactionProgress {
                    agent: agent.to_string(),
                    iteration,
                    tokens: status.current,
                },
            );
            // The loop ends when verify says the target is reached; a model that keeps working
            // past a reached target without verifying gets one more turn, then is stopped.
            if status.reached && (verified || reached_before) {
                return;
            }
            reached_before = status.reached;
            // Keep the loop's own conversation small: drop the oldest exchange (an assistant
            // message and all its tool results together) once it grows.
            if messages.len() > opening + 8 {
                let end = messages[opening + 1..]
                    .iter()
                    .position(|m| m.role == troupe_runtime::Role::Assistant)
                    .map_or(messages.len(), |p| opening + 1 + p);
                messages.drain(opening..end);
            }
        }
    }
}

fn trigger_name(trigger: CompactTrigger) -> &'static str {
    match trigger {
        CompactTrigger::Manual => "manual",
        CompactTrigger::Automatic => "auto",
        CompactTrigger::AgentTool => "tool",
    }
}

#[async_trait]
impl AgentBehavior for CompressionAgent {
    async fn handle(
        &mut self,
        request: AgentRequest,
        _ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        let _ = request;
        Err(AgentError::Refused(
            "the compression agent takes compaction jobs, not text; use troupe_agents::compact_agent".into(),
        ))
    }

    async fn handle_job(&mut self, job: Job, ctx: &AgentContext) -> Result<Job, AgentError> {
        let job = job.downcast::<CompactionJob>().map_err(|_| {
            AgentError::Refused("the compression agent only takes CompactionJob".into())
        })?;
        let span = tracing::info_span!(
            "compaction",
            { semconv::OPERATION_NAME } = "compaction",
            { semconv::AGENT_NAME } = %job.agent,
            "troupe.trigger" = trigger_name(job.trigger),
        );
        let result: CompactionResult = self.compact(*job, ctx).instrument(span).await;
        Ok(Box::new(result))
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
