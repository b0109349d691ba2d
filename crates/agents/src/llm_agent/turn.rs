//! The turn loop: model call → tool calls → tool results → … → the final answer.

use std::time::Instant;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use troupe_protocol::ResponseFormat;
use troupe_protocol::{
    ChatMessage, ChatRequest, ChatResponse, Event, MessageId, ModelDelta, ModelError,
    ResponseAssembler, ToolCall, TraceId, Usage,
};
use troupe_runtime::{AgentContext, AgentError, AgentRequest, RequestWatch};
use troupe_tools::{ToolContext, ToolResult};

use crate::traced::metered_chat_stream;
use troupe_protocol::CompactTrigger;

use super::LlmAgent;
use super::compact_tool::COMPACT_TOOL;
use super::journal::Step;
use super::recall_tool::RECALL_TOOL;
use super::request::RequestContext;
use super::spend_pause::within_budget;
use super::tool_span::in_tool_span;

impl LlmAgent {
    pub(super) fn start_request(&mut self, request: &AgentRequest) {
        self.spend.start_request();
        if self.context.conversation.is_empty() {
            if !self.spec.instructions.is_empty() {
                self.context
                    .conversation
                    .push(ChatMessage::system(self.spec.instructions.clone()));
            }
            // The spec's pins open every conversation, after the system prompt and before the
            // task; a resumed one already holds them (the session log keeps the pin).
            for message in &self.spec.pinned {
                self.context.conversation.push(message.clone().pinned());
            }
        }
        let text = match &request.from {
            Some(from) => format!("[message from agent `{from}`]\n{}", request.text),
            None => request.text.clone(),
        };
        self.context.conversation.push(ChatMessage::user(text));
    }

    /// One model call, streamed: every text delta is published as it arrives
    /// ([`Event::ModelDelta`], and to the caller's stream when the request is watched), and the
    /// call stops with [`ModelError::Cancelled`] once the caller stops listening.
    async fn stream_model(
        &self,
        request: ChatRequest,
        ctx: &AgentContext,
        trace_id: TraceId,
        watch: Option<&RequestWatch>,
    ) -> Result<ChatResponse, ModelError> {
        let collect = async {
            // The stream records the call's usage into the budget meter as it ends.
            let mut stream =
                metered_chat_stream(self.spec.model.as_ref(), request, &ctx.name, &self.spend)
                    .await?;
            let mut answer = ResponseAssembler::new();
            while let Some(delta) = stream.next().await {
                let delta = delta?;
                answer.push(&delta)?;
                if let ModelDelta::Text(text) = delta {
                    ctx.events.publish_delta(trace_id, &ctx.name, text).await;
                }
            }
            answer.finish()
        };
        until_abandoned(watch, collect, ModelError::Cancelled).await
    }

    async fn call_model(
        &self,
        ctx: &AgentContext,
        trace_id: TraceId,
        watch: Option<&RequestWatch>,
        format: Option<&ResponseFormat>,
    ) -> Result<(ChatMessage, Usage), ModelError> {
        let info = self.spec.model.info();
        let tools = self.tool_definitions();
        self.warn_if_tools_crowd_the_context(&tools, ctx, trace_id);
        let request = ChatRequest {
            messages: self.context.conversation.messages().to_vec(),
            tools,
            temperature: self.spec.temperature,
            max_tokens: self.spec.max_tokens,
            response_format: format.cloned(),
            ..ChatRequest::default()
        };
        ctx.events.publish(
            Some(trace_id),
            Event::ModelCallStarted {
                agent: ctx.name.clone(),
                model: info.name.clone(),
                messages: request.messages.len(),
            },
        );
        let started = Instant::now();
        let result = self.stream_model(request, ctx, trace_id, watch).await;
        let ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(response) => {
                ctx.events.publish(
                    Some(trace_id),
                    Event::ModelCallFinished {
                        agent: ctx.name.clone(),
                        model: info.name,
                        input_tokens: response.usage.input_tokens,
                        output_tokens: response.usage.output_tokens,
                        ms,
                        error: None,
                    },
                );
                Ok((response.message, response.usage))
            }
            Err(e) => {
                ctx.events.publish(
                    Some(trace_id),
                    Event::ModelCallFinished {
                        agent: ctx.name.clone(),
                        model: info.name,
                        input_tokens: 0,
                        output_tokens: 0,
                        ms,
                        error: Some(e.to_string()),
                    },
                );
                Err(e)
            }
        }
    }

    /// Run one assistant message's tool calls concurrently; results come back in call order,
    /// each after its note in `notes` (same order; a call run with edited arguments says so).
    /// With durable steps each result is committed to the session log as it completes (a
    /// `call_result`), before the rest of the batch: a restart answers it from the log and
    /// never runs it again.
    pub(super) async fn run_tools(
        &mut self,
        calls: &[ToolCall],
        notes: &[Option<String>],
        ctx: &AgentContext,
        trace_id: TraceId,
    ) -> Vec<ToolResult> {
        let base = self.tool_context(ctx, trace_id);
        // `recall` reads the agent's own archive: served beside the registry's tools.
        let recall = self.recall_registry(calls);
        let tools = &self.tools;
        let mut runs: FuturesUnordered<_> = calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                let tool_ctx = base.clone().with_tool_call_id(call.id.clone());
                let registry = match &recall {
                    Some(recall) if call.function.name == RECALL_TOOL => recall,
                    _ => tools,
                };
                let served = in_tool_span(call, &ctx.name, async move {
                    registry.dispatch(call, &tool_ctx).await
                });
                async move { (i, served.await) }
            })
            .collect();
        let mut results: Vec<Option<ToolResult>> = calls.iter().map(|_| None).collect();
        while let Some((i, mut result)) = runs.next().await {
            if let Some(Some(note)) = notes.get(i) {
                result.content.insert_str(0, note);
            }
            if let Some(call) = calls.get(i) {
                let step = Step::CallResult {
                    call_id: call.id.clone(),
                    content: result.content.clone(),
                };
                self.journal.commit(&self.context, step);
            }
            if let Some(slot) = results.get_mut(i) {
                *slot = Some(result);
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    ToolResult::error(
                        troupe_tools::ToolFailure::Refused,
                        "the call produced no result".to_string(),
                    )
                })
            })
            .collect()
    }

    /// The context this agent's tool calls get in the request `trace_id`.
    pub(super) fn tool_context(&self, ctx: &AgentContext, trace_id: TraceId) -> ToolContext {
        ToolContext::new_with_events(
            ctx.name.clone(),
            self.spec.workspace_root.clone(),
            ctx.events.clone(),
        )
        .with_ledger(self.context.ledger.clone())
        .with_trace_id(Some(trace_id))
    }

    /// The request's model calls until a final answer; `format` (a typed ask's schema) goes
    /// with every call of this request and no other.
    pub(super) async fn run_turns(
        &mut self,
        ctx: &AgentContext,
        req: &mut RequestContext,
        format: Option<&ResponseFormat>,
    ) -> Result<String, AgentError> {
        let trace_id = req.trace.id();
        // Kept for the whole request: the caller may drop its stream at any point.
        let watch = ctx.events.watch_of(trace_id);
        let watch = watch.as_ref();
        for _ in 0..self.spec.max_turns {
            if watch.is_some_and(RequestWatch::is_abandoned) {
                return Err(AgentError::Cancelled);
            }
            // No call starts once a budget is spent (or, paused, until it is raised); what the
            // request added stays.
            within_budget(&self.spend, ctx, trace_id, watch).await?;
            // Measured before every call, the first included: what the request added (a large
            // message, a relayed answer) has not been checked yet.
            self.prepare_call(ctx, req)
                .await
                .map_err(AgentError::ContextOverflow)?;
            // A compaction on the way, and the request's opening, committed before the call.
            self.commit_before_acting(Step::BeforeCall)?;
            // A compaction on the way may have spent the rest.
            within_budget(&self.spend, ctx, trace_id, watch).await?;
            let (reply, usage) = match self.call_model(ctx, trace_id, watch, format).await {
                Ok(reply) => reply,
                Err(ModelError::Cancelled) if watch.is_some_and(RequestWatch::is_abandoned) => {
                    return Err(AgentError::Cancelled);
                }
                Err(ModelError::ContextLengthExceeded(why)) => {
                    // Emergency: compact, then retry the call once.
                    tracing::warn!(agent = %ctx.name, "context length exceeded ({why}); compacting and retrying once");
                    self.compact(CompactTrigger::Emergency, None, ctx, req)
                        .await
                        .map_err(|e| {
                            AgentError::Model(ModelError::ContextLengthExceeded(format!(
                                "{why}; compacting first failed: {e}"
                            )))
                        })?;
                    self.prepare_call(ctx, req)
                        .await
                        .map_err(AgentError::ContextOverflow)?;
                    self.call_model(ctx, trace_id, watch, format)
                        .await
                        .map_err(AgentError::Model)?
                }
                Err(e) => return Err(AgentError::Model(e)),
            };
            let calls = reply.calls().to_vec();
            let text = reply.text();
            // The caller gets `text` whole; an answer too large for the window is kept cut.
            // The definitions of the request this answer came from, bounded when it was sent:
            // no copy of them for every answer.
            let tools_bound = self.request_tool_tokens_bound();
            self.context
                .push_answer(reply, tools_bound, &self.spec.name);
            // Committed before the agent acts on it: a restart never makes this call again.
            self.commit_before_acting(Step::Answer {
                usage,
                calls: &calls,
            })?;
            if calls.is_empty() {
                self.check_context(ctx, req).await;
                return Ok(text);
            }
            self.check_context(ctx, req).await;
            let compact_call = self.spec.compaction.agent_tool;
            let (compact_calls, tool_calls): (Vec<ToolCall>, Vec<ToolCall>) = calls
                .iter()
                .cloned()
                .partition(|c| compact_call && c.function.name == COMPACT_TOOL);
            // Abandoning drops the calls; the registry then cancels each call's
            // `ToolContext::cancel`, so work a tool moved off this task stops too. The approval
            // policy may pause the turn here (`approval.rs`).
            let ran = self
                .run_approved(&tool_calls, &calls, ctx, trace_id, watch)
                .await?;
            let mut results: std::collections::HashMap<String, ToolResult> =
                calls_results(&tool_calls, ran);
            let mut fatal = None;
            let mut compact_result: Option<(MessageId, &ToolCall)> = None;
            for call in &calls {
                let content = match results.remove(&call.id) {
                    Some(result) => {
                        if let troupe_tools::ToolOutcome::Fatal(reason) = &result.outcome {
                            fatal.get_or_insert_with(|| {
                                format!("tool `{}` failed fatally: {reason}", call.function.name)
                            });
                        }
                        result.content
                    }
                    None => "compacting the conversation…".to_string(),
                };
                // Every call gets its result, fatal or not, so the conversation stays valid.
                let id = self
                    .context
                    .conversation
                    .push(ChatMessage::tool_result(call.id.clone(), content));
                if compact_calls.iter().any(|c| c.id == call.id) && compact_result.is_none() {
                    compact_result = Some((id, call));
                }
            }
            if let Some((result_id, call)) = compact_result {
                self.answer_compact_tool(result_id, call, ctx, req).await;
            }
            // The batch's results as messages: its calls are answered in the log.
            self.commit(Step::Results);
            if let Some(reason) = fatal {
                return Err(AgentError::Failed(reason));
            }
            self.check_context(ctx, req).await;
        }
        Err(AgentError::MaxTurns(self.spec.max_turns))
    }
}

/// Run `work` to its end, or until the caller watching the request stops listening (then
/// `cancelled`). Unwatched requests just run `work`.
pub(super) async fn until_abandoned<T, E>(
    watch: Option<&RequestWatch>,
    work: impl Future<Output = Result<T, E>>,
    cancelled: E,
) -> Result<T, E> {
    match watch {
        None => work.await,
        Some(watch) => tokio::select! {
            done = work => done,
            () = watch.abandoned() => Err(cancelled),
        },
    }
}

fn calls_results(
    calls: &[ToolCall],
    results: Vec<ToolResult>,
) -> std::collections::HashMap<String, ToolResult> {
    calls.iter().map(|c| c.id.clone()).zip(results).collect()
}
