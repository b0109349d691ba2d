//! The compression agent's model loop: its model works the [`CompactionSession`] with the four
//! tools until `verify_compression_target` says the target is reached or the iteration bound is
//! hit. It is the [`Steering`] of [`compact_with`](troupe_compaction::compact_with), so the
//! planner finishes whatever the model leaves.

use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;
use troupe_compaction::Steering;
use troupe_compaction::session::CompactionSession;
use troupe_compaction::summary::Summarizer;
use troupe_protocol::trace::{self, semconv};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, Event, RequestPriority, ToolCall, ToolChoice, TraceId,
};
use troupe_runtime::EventBus;

use crate::compaction_settings::shared_counter;
use crate::compression::tools;
use crate::tool_span;

const SYSTEM_PROMPT: &str = include_str!("prompt.md");

/// Output tokens the model may spend per iteration (tool calls are short).
const MAX_TOKENS_PER_CALL: u32 = 256;

/// The loop's own conversation (with its tools and the next answer) may take at most this
/// share of the model's window: past it the loop hands over to the planner, so a long loop does
/// not outgrow a small model. It never drops its oldest exchange instead: every request is the
/// one before plus what happened since, so a caching provider (or the local engine's kept
/// prefix) reads the system prompt, tools, metadata and earlier steps from its cache, where a
/// dropped exchange would make everything after it new again on every later call.
const LOOP_WINDOW_SHARE: usize = 2;

/// Steps in a row that free nothing before the loop hands over to the planner: a model that
/// keeps asking for what is refused would otherwise spend every iteration (each a full prompt
/// on a local model) for nothing.
const MAX_IDLE_STEPS: u32 = 2;

/// What the compression agent does once a compaction goes ahead: when it has a model, let the
/// model work the session (the asker's compaction client announced the compaction).
pub(crate) struct ModelSteering {
    /// The model, `None` for `--model none` (the planner and mechanical summaries only).
    pub(crate) model: Option<Arc<dyn ChatModel>>,
    /// The compression agent's own name (its `chat` spans carry it).
    pub(crate) compressor: String,
    /// Whose conversation it is.
    pub(crate) agent: String,
    /// The trace id of the request that caused the compaction.
    pub(crate) trace_id: TraceId,
    pub(crate) events: EventBus,
    pub(crate) max_iterations: u32,
}

#[async_trait]
impl Steering for ModelSteering {
    async fn steer(
        &self,
        session: &mut CompactionSession<'_>,
        summarizer: Option<&dyn Summarizer>,
    ) {
        if let (Some(model), Some(summarizer)) = (&self.model, summarizer) {
            self.run(model.as_ref(), session, summarizer).await;
        }
    }
}

impl ModelSteering {
    /// The loop opens with a `get_compression_metadata` call and its result, as if the model had
    /// asked, and after every step of the model it runs `verify_compression_target` itself: it
    /// ends as soon as verify says the target is met, when the model stops calling tools, when
    /// two steps in a row free nothing, when its own conversation outgrows its share of the
    /// window, or at the iteration bound. Each request appends to the one before (nothing earlier
    /// is rewritten), so its prefix is cached across iterations. Every tool call — the model's
    /// and the loop's own — is an `execute_tool` span.
    async fn run(
        &self,
        model: &dyn ChatModel,
        session: &mut CompactionSession<'_>,
        summarizer: &dyn Summarizer,
    ) {
        let metadata_call = ToolCall::new("call_metadata", tools::GET_METADATA, "{}");
        let metadata = self.execute(&metadata_call, session, summarizer).await;
        let mut messages: Vec<Arc<ChatMessage>> = [
            ChatMessage::system(SYSTEM_PROMPT),
            ChatMessage::user(format!(
                "Compress the conversation of agent `{}` to its target.",
                self.agent
            )),
            ChatMessage::assistant_tool_calls(None, vec![metadata_call]),
            ChatMessage::tool_result("call_metadata", metadata.content),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        // The same definitions in every request: they lead the prompt a provider caches.
        let definitions = tools::definitions();
        let tool_tokens =
            shared_counter().count(&serde_json::to_string(&definitions).unwrap_or_default());
        let mut idle_steps = 0;
        for iteration in 1..=self.max_iterations {
            let request = ChatRequest {
                messages: messages.clone(),
                tools: definitions.clone(),
                tool_choice: ToolChoice::Required,
                temperature: Some(0.0),
                max_tokens: Some(MAX_TOKENS_PER_CALL),
                // A model with one queue serves the agents' own calls first.
                priority: RequestPriority::Background,
                agent: None,
                response_format: None,
            };
            // The model is already traced (a `TracedModel`): its calls are `chat` spans.
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
            messages.push(Arc::new(reply));
            let before = session.verify_target().current;
            for call in &calls {
                let result = self.execute(call, session, summarizer).await;
                messages.push(Arc::new(ChatMessage::tool_result(
                    call.id.clone(),
                    result.content,
                )));
            }
            if !calls
                .iter()
                .any(|c| c.function.name == tools::VERIFY_TARGET)
            {
                let verify = ToolCall::new(
                    format!("call_verify_{iteration}"),
                    tools::VERIFY_TARGET,
                    "{}",
                );
                self.execute(&verify, session, summarizer).await;
            }
            let status = session.verify_target();
            self.events.publish(
                Some(self.trace_id),
                Event::CompactionProgress {
                    agent: self.agent.clone(),
                    iteration,
                    tokens: status.current,
                },
            );
            if status.reached {
                return;
            }
            idle_steps = if status.current < before {
                0
            } else {
                idle_steps + 1
            };
            if idle_steps >= MAX_IDLE_STEPS {
                return;
            }
            let counter = shared_counter();
            let used = tool_tokens
                + messages
                    .iter()
                    .map(|m| counter.count_message(m))
                    .sum::<usize>()
                + MAX_TOKENS_PER_CALL as usize;
            if used > model.info().context_window / LOOP_WINDOW_SHARE {
                return;
            }
        }
    }

    /// Run one tool call against the session inside its `execute_tool` span.
    async fn execute(
        &self,
        call: &ToolCall,
        session: &mut CompactionSession<'_>,
        summarizer: &dyn Summarizer,
    ) -> tools::ToolExecution {
        let span = tool_span(call, &self.compressor);
        let result = tools::execute(call, session, summarizer)
            .instrument(span.clone())
            .await;
        if trace::record_content() {
            span.record(semconv::TOOL_CALL_RESULT, result.content.as_str());
        }
        result
    }
}
