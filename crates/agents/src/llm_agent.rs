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
use troupe_compaction::{
    Archive, BudgetPolicy, BudgetState, CompactionReport, TokenCache, TokenCounter,
};
use troupe_runtime::trace::{self, semconv};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, ChatMessage, ChatModel,
    ChatRequest, Checkpoint, Conversation, Event, Job, JobReply, JobRequest, MessageId,
    MessageKind, ModelError, ToolCall, ToolDefinition, TraceContext,
};
use troupe_tools::{FileLedger, SharedLedger, ToolContext, ToolOutcome, ToolRegistry, ToolResult};

use crate::compaction_hooks::{
    COMPACTION_TIMEOUT, CloseScope, CompactError, CompactNow, CompactOutcome, CompactionTracker,
    ContextQuery, ContextShare, ContextStats, OpenScope, Trigger, crate_trigger,
};
use crate::compression::{COMPRESSION_AGENT, CompactionJob, ScopeSummaryJob};
use crate::model::{tool_span, traced_chat};
use crate::session_sync::{SessionClaim, SessionSync, restore};
use crate::spec::AgentSpec;
use crate::team_tools::{AskAgentTool, TeamLink};

/// An agent whose answers come from a [`troupe_runtime::ChatModel`] and its tools.
pub struct LlmAgent {
    spec: AgentSpec,
    tools: ToolRegistry,
    conversation: Conversation,
    ledger: SharedLedger,
    link: TeamLink,
    policy: BudgetPolicy,
    counter: Arc<dyn TokenCounter>,
    token_cache: TokenCache,
    /// Whether the warning for the current crossing of the warning threshold went out.
    warned: bool,
    archive: Archive,
    last_compaction: Option<CompactionReport>,
    /// Open scopes, innermost last: label and the first id that belongs to it.
    scopes: Vec<(String, MessageId)>,
    last_scope_model: Option<Arc<dyn ChatModel>>,
    /// The session log, when the spec names one.
    session: Option<SessionSync>,
    /// The trace of the request or job being handled: compactions it causes join it.
    trace: TraceContext,
}

/// What an [`LlmAgent`] keeps across restarts beyond its conversation.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct AgentState {
    ledger: FileLedger,
    #[serde(default)]
    archive: Archive,
    #[serde(default)]
    last_compaction: Option<CompactionReport>,
}

/// The name of the agent-callable compaction tool.
pub const COMPACT_TOOL: &str = "compact";

impl LlmAgent {
    /// A fresh agent, or one restored from a checkpoint. Its session log, if any, is locked for
    /// as long as the agent lives.
    pub fn new(spec: AgentSpec, checkpoint: Option<Checkpoint>) -> Result<Self, AgentError> {
        Self::build(spec, checkpoint, None)
    }

    /// [`LlmAgent::new`], opening the session log under `claim` when given.
    fn build(
        spec: AgentSpec,
        checkpoint: Option<Checkpoint>,
        claim: Option<&SessionClaim>,
    ) -> Result<Self, AgentError> {
        let link = TeamLink::default();
        let mut tools = spec.tools.clone();
        if spec.team_messaging {
            tools
                .register(AskAgentTool { link: link.clone() })
                .map_err(|e| AgentError::Failed(e.to_string()))?;
        }
        let mut session = None;
        let mut restored = None;
        if let Some(path) = &spec.session {
            let (mut sync, logged) = SessionSync::open(path, &spec.name, claim)
                .map_err(|e| AgentError::Failed(e.to_string()))?;
            for warning in &logged.warnings {
                tracing::warn!(agent = %spec.name, "{warning}");
            }
            if checkpoint.is_none() {
                restored =
                    Some(restore(path, &logged).map_err(|e| AgentError::Failed(e.to_string()))?);
            }
            // Written only once the log has restored: a log refused above stays as it was (apart
            // from a torn last line, which opening cuts off).
            sync.note_model(logged.model.as_deref(), &spec.model.info().name)
                .map_err(|e| AgentError::Failed(e.to_string()))?;
            session = Some(sync);
        }
        let (conversation, state) = match (checkpoint, restored) {
            (Some(c), _) => {
                let state: AgentState = serde_json::from_value(c.state).unwrap_or_default();
                (c.conversation, state)
            }
            (None, Some(r)) => (
                r.conversation,
                AgentState {
                    ledger: r.ledger,
                    archive: r.archive,
                    last_compaction: r.last_compaction,
                },
            ),
            (None, None) => (Conversation::new(), AgentState::default()),
        };
        let policy = spec.compaction.policy_for(spec.model.info().context_window);
        policy
            .validate()
            .map_err(|e| AgentError::Failed(format!("invalid compaction policy: {e}")))?;
        let counter = spec.compaction.counter();
        Ok(LlmAgent {
            spec,
            tools,
            conversation,
            ledger: SharedLedger::from_ledger(state.ledger),
            link,
            policy,
            counter,
            token_cache: TokenCache::new(),
            warned: false,
            archive: state.archive,
            last_compaction: state.last_compaction,
            scopes: Vec::new(),
            last_scope_model: None,
            session,
            trace: TraceContext::new_root(),
        })
    }

    /// A factory the supervisor uses to build (and rebuild) this agent. The factory holds the
    /// session log's lock, so a rebuilt agent never finds its log locked by its predecessor.
    pub fn factory(spec: AgentSpec) -> BehaviorFactory {
        let claim = SessionClaim::default();
        Arc::new(move |checkpoint| {
            let agent = LlmAgent::build(spec.clone(), checkpoint, Some(&claim))?;
            Ok(Box::new(agent) as Box<dyn AgentBehavior>)
        })
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

    /// The archive of every message compaction replaced (for `expand`).
    pub fn archive(&self) -> &Archive {
        &self.archive
    }

    /// Tokens in the conversation now (cached per message: O(new messages)).
    pub fn tokens(&self) -> usize {
        self.token_cache
            .count_messages(self.counter.as_ref(), self.conversation.messages())
            .total
    }

    /// The budget policy in force.
    pub fn policy(&self) -> &BudgetPolicy {
        &self.policy
    }

    fn tool_definitions(&self) -> Vec<ToolDefinition> {
        let mut definitions = self.tools.definitions();
        if self.spec.compaction.agent_tool {
            definitions.push(ToolDefinition {
                name: COMPACT_TOOL.into(),
                description:
                    "Compact your own conversation when it has grown long; optional `focus` \
                              says what the summary must keep."
                        .into(),
                parameters: serde_json::json!({
                    "type": "object",
                    "properties": {"focus": {"type": "string"}},
                    "additionalProperties": false
                }),
            });
        }
        definitions
    }

    /// After each model turn and tool batch: warn at the warning threshold, compact at the trigger.
    async fn check_budget(&mut self, ctx: &AgentContext, trace_id: &str) {
        let tokens = self.tokens();
        match self.policy.state(tokens) {
            BudgetState::Ok => self.warned = false,
            state => {
                if !self.warned {
                    self.warned = true;
                    ctx.events.publish(
                        Some(trace_id.to_string()),
                        Event::ContextWarning {
                            agent: ctx.name.clone(),
                            tokens,
                            window: self.policy.context_window,
                        },
                    );
                }
                if state == BudgetState::Trigger
                    && self.spec.compaction.auto
                    && let Err(e) = self.compact(Trigger::Auto, None, ctx).await
                {
                    tracing::warn!(agent = %ctx.name, error = %e, "automatic compaction did not run");
                }
            }
        }
    }

    /// Give the compression agent a job as part of the request being handled (same trace).
    async fn ask_compressor<J: Job>(
        &self,
        job: J,
        ctx: &AgentContext,
    ) -> Result<J::Reply, troupe_runtime::AskError> {
        ctx.directory
            .ask_job(
                COMPRESSION_AGENT,
                job,
                self.trace.child(),
                COMPACTION_TIMEOUT,
            )
            .await
    }

    /// Ask the compression agent to compact this conversation and apply the result.
    async fn compact(
        &mut self,
        trigger: Trigger,
        instructions: Option<String>,
        ctx: &AgentContext,
    ) -> Result<CompactOutcome, CompactError> {
        if !ctx.directory.is_live(COMPRESSION_AGENT) {
            return Err(CompactError::NoCompressionAgent);
        }
        let tracker = CompactionTracker::of(&ctx.directory);
        let publish = tracker.begin(&ctx.name);
        let job = CompactionJob {
            agent: ctx.name.clone(),
            conversation: self.conversation.clone(),
            ledger: self.ledger.snapshot(),
            policy: self.policy.clone(),
            trigger: crate_trigger(trigger),
            instructions,
            agent_model: Some(self.spec.model.clone()),
            token_cache: Some(self.token_cache.clone()),
        };
        let answer = self.ask_compressor(job, ctx).await;
        let outcome = match answer {
            Ok(Ok(compaction)) => {
                let before: std::collections::HashSet<MessageId> =
                    self.conversation.messages().iter().map(|m| m.id).collect();
                if compaction.changed() {
                    compaction.apply_to(&mut self.conversation);
                    self.archive.extend(&compaction.archive);
                }
                let summary = self
                    .conversation
                    .messages()
                    .iter()
                    .rev()
                    .find(|m| m.kind == MessageKind::Summary && !before.contains(&m.id))
                    .map(ChatMessage::text);
                self.last_compaction = Some(compaction.report.clone());
                self.warned = false;
                Ok(CompactOutcome {
                    report: compaction.report,
                    summary,
                })
            }
            Ok(Err(reason)) => Err(CompactError::Failed(reason)),
            Err(e) => Err(CompactError::Ask(e)),
        };
        let _ = publish.send(Some(outcome.clone()));
        tracker.end(&ctx.name);
        outcome
    }

    /// A turn boundary: write what changed to the session log, if there is one. A failed write
    /// is logged and retried at the next boundary (the difference is recomputed then), so the
    /// answer is not lost to a full disk.
    fn persist(&mut self) {
        let Some(sync) = &mut self.session else {
            return;
        };
        if let Err(e) = sync.persist(
            &self.conversation,
            &self.archive,
            &self.ledger.snapshot(),
            self.last_compaction.as_ref(),
        ) {
            tracing::error!(
                agent = %self.spec.name,
                session = %sync.path().display(),
                error = %e,
                "could not write the session log; will retry at the next turn boundary"
            );
        }
    }

    fn context_stats(&self) -> ContextStats {
        let counts = self
            .token_cache
            .count_messages(self.counter.as_ref(), self.conversation.messages());
        let name_of = |v: serde_json::Result<serde_json::Value>| {
            v.ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        };
        let mut by_kind = std::collections::BTreeMap::<String, (usize, usize)>::new();
        let mut by_role = std::collections::BTreeMap::<String, (usize, usize)>::new();
        for (m, tokens) in self.conversation.messages().iter().zip(&counts.per_message) {
            for (map, name) in [
                (&mut by_kind, name_of(serde_json::to_value(m.kind))),
                (&mut by_role, name_of(serde_json::to_value(m.role))),
            ] {
                let share = map.entry(name).or_default();
                share.0 += 1;
                share.1 += tokens;
            }
        }
        let shares = |map: std::collections::BTreeMap<String, (usize, usize)>| {
            map.into_iter()
                .map(|(name, (messages, tokens))| ContextShare {
                    name,
                    messages,
                    tokens,
                })
                .collect()
        };
        ContextStats {
            tokens: counts.total,
            window: self.policy.context_window,
            percent: self.policy.percent(counts.total),
            by_kind: shares(by_kind),
            by_role: shares(by_role),
            last_compaction: self.last_compaction.clone(),
        }
    }

    /// Close the innermost scope: its messages become one summary between scope markers.
    async fn close_scope(
        &mut self,
        prompt: Option<String>,
        model: Option<Arc<dyn ChatModel>>,
        ctx: &AgentContext,
    ) -> Result<Option<String>, CompactError> {
        let (label, start) = self.scopes.last().cloned().ok_or(CompactError::NoScope)?;
        let model = model
            .or_else(|| self.last_scope_model.clone())
            .ok_or(CompactError::NoModel)?;
        self.scopes.pop();
        let first = self
            .conversation
            .messages()
            .iter()
            .position(|m| m.id >= start);
        let Some(first) = first else { return Ok(None) };
        let entries: Vec<ChatMessage> = self.conversation.messages()[first..].to_vec();
        if !ctx.directory.is_live(COMPRESSION_AGENT) {
            self.scopes.push((label, start));
            return Err(CompactError::NoCompressionAgent);
        }
        let job = ScopeSummaryJob {
            agent: ctx.name.clone(),
            label: label.clone(),
            messages: entries.clone(),
            prompt,
            model: model.clone(),
        };
        let answer = self.ask_compressor(job, ctx).await;
        let summary = match answer {
            Ok(Ok(summary)) => summary,
            Ok(Err(e)) => {
                self.scopes.push((label, start));
                return Err(CompactError::Scope(e));
            }
            Err(e) => {
                self.scopes.push((label, start));
                return Err(CompactError::Ask(e));
            }
        };
        let mut kept: Vec<ChatMessage> = self.conversation.messages()[..first].to_vec();
        let id = self.conversation.allocate_id();
        let mut marker =
            ChatMessage::user(format!("<scope label=\"{label}\">\n{summary}\n</scope>"))
                .with_kind(MessageKind::Summary);
        marker.id = id;
        self.archive.record_replacement(id, &entries);
        kept.push(marker);
        self.conversation.replace_messages(kept);
        self.last_scope_model = Some(model);
        Ok(Some(summary))
    }

    fn start_request(&mut self, request: &AgentRequest) {
        if self.conversation.is_empty() && !self.spec.instructions.is_empty() {
            self.conversation
                .push(ChatMessage::system(self.spec.instructions.clone()));
        }
        let text = match &request.from {
            Some(from) => format!("[message from agent `{from}`]\n{}", request.text),
            None => request.text.clone(),
        };
        self.conversation.push(ChatMessage::user(text));
    }

    async fn call_model(
        &self,
        ctx: &AgentContext,
        trace_id: &str,
    ) -> Result<ChatMessage, ModelError> {
        let info = self.spec.model.info();
        let request = ChatRequest {
            messages: self.conversation.messages().to_vec(),
            tools: self.tool_definitions(),
            temperature: self.spec.temperature,
            max_tokens: self.spec.max_tokens,
            ..ChatRequest::default()
        };
        ctx.events.publish(
            Some(trace_id.to_string()),
            Event::ModelCallStarted {
                agent: ctx.name.clone(),
                model: info.name.clone(),
                messages: request.messages.len(),
            },
        );
        let started = Instant::now();
        let result = traced_chat(self.spec.model.as_ref(), request, &ctx.name).await;
        let ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(response) => {
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
                Err(e)
            }
        }
    }

    /// Run one assistant message's tool calls concurrently; results come back in call order.
    async fn run_tools(
        &self,
        calls: &[ToolCall],
        ctx: &AgentContext,
        trace_id: &str,
    ) -> Vec<ToolResult> {
        let base = ToolContext::new(ctx.name.clone(), self.spec.workspace_root.clone())
            .with_events(ctx.events.clone())
            .with_ledger(self.ledger.clone())
            .with_trace_id(Some(trace_id.to_string()));
        let runs = calls.iter().map(|call| {
            let span = tool_span(call, &ctx.name);
            let record_content = trace::record_content();
            let tool_ctx = base.clone().with_tool_call_id(call.id.clone());
            let recorder = span.clone();
            async move {
                let result = self.tools.dispatch(call, &tool_ctx).await;
                if record_content {
                    recorder.record(semconv::TOOL_CALL_RESULT, result.content.as_str());
                }
                match &result.outcome {
                    ToolOutcome::Success => {}
                    ToolOutcome::Error(failure) => {
                        recorder.record(semconv::ERROR_TYPE, failure.kind());
                    }
                    ToolOutcome::Fatal(_) => {
                        recorder.record(semconv::ERROR_TYPE, "fatal");
                    }
                }
                result
            }
            .instrument(span)
        });
        join_all(runs).await
    }

    async fn run_turns(
        &mut self,
        ctx: &AgentContext,
        trace_id: &str,
    ) -> Result<(String, u32), AgentError> {
        for turn in 1..=self.spec.max_turns {
            let reply = match self.call_model(ctx, trace_id).await {
                Ok(reply) => reply,
                Err(ModelError::ContextLengthExceeded(why)) => {
                    // Emergency: compact, then retry the call once.
                    tracing::warn!(agent = %ctx.name, "context length exceeded ({why}); compacting and retrying once");
                    self.compact(Trigger::Emergency, None, ctx)
                        .await
                        .map_err(|e| {
                            AgentError::Model(format!("context length exceeded ({why}) and {e}"))
                        })?;
                    self.call_model(ctx, trace_id)
                        .await
                        .map_err(|e| AgentError::Model(e.to_string()))?
                }
                Err(e) => return Err(AgentError::Model(e.to_string())),
            };
            let calls = reply.calls().to_vec();
            let text = reply.text();
            self.conversation.push(reply);
            if calls.is_empty() {
                self.check_budget(ctx, trace_id).await;
                return Ok((text, turn));
            }
            self.check_budget(ctx, trace_id).await;
            let compact_call = self.spec.compaction.agent_tool;
            let (compact_calls, tool_calls): (Vec<ToolCall>, Vec<ToolCall>) = calls
                .iter()
                .cloned()
                .partition(|c| compact_call && c.function.name == COMPACT_TOOL);
            let mut results: std::collections::HashMap<String, ToolResult> = calls_results(
                &tool_calls,
                self.run_tools(&tool_calls, ctx, trace_id).await,
            );
            let mut fatal = None;
            let mut compact_result: Option<(MessageId, Option<String>)> = None;
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
                    .conversation
                    .push(ChatMessage::tool_result(call.id.clone(), content));
                if compact_calls.iter().any(|c| c.id == call.id) && compact_result.is_none() {
                    let focus = serde_json::from_str::<serde_json::Value>(&call.function.arguments)
                        .ok()
                        .and_then(|v| v.get("focus").and_then(|f| f.as_str()).map(str::to_string));
                    compact_result = Some((id, focus));
                }
            }
            if let Some((result_id, focus)) = compact_result {
                // The tool's own result is already in place, so compaction sees valid pairs.
                let text = match self.compact(Trigger::Tool, focus, ctx).await {
                    Ok(outcome) if outcome.report.no_compaction_needed => {
                        "no compaction needed".to_string()
                    }
                    Ok(outcome) => outcome.summary.unwrap_or(outcome.report.reason),
                    Err(e) => format!("compaction did not run: {e}"),
                };
                if let Some(message) = self.conversation.get_mut(result_id) {
                    message.set_text(text);
                }
            }
            if let Some(reason) = fatal {
                return Err(AgentError::Failed(reason));
            }
            self.check_budget(ctx, trace_id).await;
        }
        Err(AgentError::MaxTurns(self.spec.max_turns))
    }
}

fn calls_results(
    calls: &[ToolCall],
    results: Vec<ToolResult>,
) -> std::collections::HashMap<String, ToolResult> {
    calls.iter().map(|c| c.id.clone()).zip(results).collect()
}

#[async_trait]
impl AgentBehavior for LlmAgent {
    async fn handle(
        &mut self,
        request: AgentRequest,
        ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        let trace_id = request.trace.trace_id_hex();
        self.trace = request.trace;
        self.link.set(ctx.directory.clone(), request.trace);
        let before = self.conversation.clone();
        ctx.events.publish(
            Some(trace_id.clone()),
            Event::TurnStarted {
                agent: ctx.name.clone(),
            },
        );
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
        self.persist();
        ctx.events.publish(
            Some(trace_id),
            Event::TurnFinished {
                agent: ctx.name.clone(),
                model_calls,
                error,
            },
        );
        outcome.map(|(text, _)| text)
    }

    async fn handle_job(
        &mut self,
        job: JobRequest,
        ctx: &AgentContext,
    ) -> Result<JobReply, AgentError> {
        self.trace = job.trace();
        let job = match job.open::<CompactNow>() {
            Ok((CompactNow { instructions }, reply)) => {
                let outcome = if self.conversation.len() < 2 {
                    Err(CompactError::NothingToCompact)
                } else {
                    self.compact(Trigger::Manual, instructions, ctx).await
                };
                if outcome.is_ok() {
                    self.persist();
                }
                return Ok(reply.answer(outcome));
            }
            Err(job) => job,
        };
        let job = match job.open::<OpenScope>() {
            Ok((OpenScope { label }, reply)) => {
                self.scopes.push((label, self.conversation.next_id()));
                return Ok(reply.answer(Ok(())));
            }
            Err(job) => job,
        };
        let job = match job.open::<CloseScope>() {
            Ok((CloseScope { prompt, model }, reply)) => {
                let closed = self.close_scope(prompt, model, ctx).await;
                if closed.is_ok() {
                    self.persist();
                }
                return Ok(reply.answer(closed));
            }
            Err(job) => job,
        };
        match job.open::<ContextQuery>() {
            Ok((ContextQuery, reply)) => Ok(reply.answer(self.context_stats())),
            Err(job) => Err(job.refuse(&ctx.name)),
        }
    }

    fn checkpoint(&self) -> Checkpoint {
        let state = AgentState {
            ledger: self.ledger.snapshot(),
            archive: self.archive.clone(),
            last_compaction: self.last_compaction.clone(),
        };
        Checkpoint {
            conversation: self.conversation.clone(),
            state: serde_json::to_value(state).unwrap_or_default(),
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
