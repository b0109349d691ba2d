//! [`CompressionAgent`]: the dedicated agent that shrinks conversations to their target.
//!
//! Every compaction in troupe is a [`CompactionJob`] this agent handles — automatic, `/compact`,
//! the `compact` tool, emergency, and the CLI's `compact` and `replay` — and every closed scope
//! is a [`ScopeSummaryJob`]. A compaction runs
//! [`compact_with`](troupe_compaction::compact_with): the anti-thrash guard for automatic
//! triggers, then the model's tool loop over the four compression tools, then the deterministic
//! planner for whatever is left, so the target is met whenever it is reachable. Every result is
//! validated by the compaction crate.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;
use troupe_compaction::{
    CompactOptions, Compaction, CompactionError, CompactionReport, MechanicalSummarizer,
    Summarizer, ThrashGuard, compact_with,
};
use troupe_runtime::trace::semconv;
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, ChatModel, Checkpoint,
    Event, JobReply, JobRequest, TraceContext,
};

use crate::compression::config::CompressionConfig;
use crate::compression::job::{CompactionJob, ScopeSummaryJob};
use crate::compression::model_loop::ModelSteering;
use crate::compression::remote::{RemoteCompaction, RemoteCompactionJob};
use crate::compression::scope::summarize_scope;
use crate::compression::summarizer::ModelSummarizer;
use crate::model::TracedModel;

/// The name the compression agent has in every team.
pub const COMPRESSION_AGENT: &str = "compressor";

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

    async fn compact(
        &mut self,
        job: CompactionJob,
        trace: &TraceContext,
        ctx: &AgentContext,
    ) -> Result<Compaction, CompactionError> {
        let model: Option<Arc<dyn ChatModel>> = self
            .config
            .model
            .pick(job.agent_model.as_ref())
            .map(|m| Arc::new(TracedModel::new(m, ctx.name.clone())) as Arc<dyn ChatModel>);
        let model_summarizer = model.clone().map(ModelSummarizer::new);
        let mechanical = MechanicalSummarizer::new();
        let summarizer: &dyn Summarizer = match &model_summarizer {
            Some(s) => s,
            None => &mechanical,
        };
        let options = CompactOptions {
            instructions: job.instructions.clone(),
            trigger: job.trigger,
            guard: self.guards.get(&job.agent).copied(),
            token_cache: job.token_cache.clone(),
            ..CompactOptions::default()
        };
        let steering = ModelSteering {
            model,
            compressor: ctx.name.clone(),
            agent: job.agent.clone(),
            trigger: job.trigger.as_str(),
            trace_id: trace.trace_id_hex(),
            events: ctx.events.clone(),
            max_iterations: self.config.max_iterations,
        };
        let result = compact_with(
            &job.conversation,
            &job.ledger,
            &job.policy,
            self.config.counter.as_ref(),
            Some(summarizer),
            options,
            &steering,
        )
        .await;
        match result {
            Ok(mut compaction) => {
                if let Some(s) = &model_summarizer {
                    compaction.report.fallbacks.extend(s.take_fallbacks());
                }
                self.guards
                    .entry(job.agent.clone())
                    .or_default()
                    .record(&compaction.report);
                record_report(&compaction.report);
                ctx.events.publish(
                    Some(trace.trace_id_hex()),
                    Event::CompactionFinished {
                        agent: job.agent.clone(),
                        report: Box::new(compaction.report.clone()),
                    },
                );
                Ok(compaction)
            }
            Err(e) => {
                tracing::warn!(agent = %job.agent, error = %e, "compaction failed");
                ctx.events.publish(
                    Some(trace.trace_id_hex()),
                    Event::CompactionFailed {
                        agent: job.agent.clone(),
                        reason: e.to_string(),
                    },
                );
                Err(e)
            }
        }
    }
}

/// The `compaction` span of `agent`'s conversation. Opened inside the job, it is a child of the
/// caller's span (the actor runs jobs inside it): one trace from the request that triggered the
/// compaction down to the compressor's model and tool calls.
pub(crate) fn compaction_span(agent: &str, compressor: &str, trigger: &str) -> tracing::Span {
    tracing::info_span!(
        "compaction",
        { semconv::OPERATION_NAME } = "compaction",
        { semconv::OPENINFERENCE_SPAN_KIND } = "CHAIN",
        { semconv::AGENT_NAME } = %agent,
        { semconv::COMPRESSOR } = %compressor,
        { semconv::TRIGGER } = %trigger,
        { semconv::SCOPE } = tracing::field::Empty,
        { semconv::COMPACTION_TOKENS_BEFORE } = tracing::field::Empty,
        { semconv::COMPACTION_TOKENS_AFTER } = tracing::field::Empty,
        { semconv::COMPACTION_TARGET } = tracing::field::Empty,
        { semconv::COMPACTION_REACHED } = tracing::field::Empty,
        { semconv::COMPACTION_SKIPPED } = tracing::field::Empty,
        { semconv::COMPACTION_TIERS } = tracing::field::Empty,
        { semconv::COMPACTION_REASON } = tracing::field::Empty,
        { semconv::COMPACTION_SUMMARIZER_CALLS } = tracing::field::Empty,
    )
}

/// Put what a compaction did on the current (`compaction`) span.
pub(crate) fn record_report(report: &CompactionReport) {
    let span = tracing::Span::current();
    span.record(semconv::COMPACTION_TOKENS_BEFORE, report.tokens_before);
    span.record(semconv::COMPACTION_TOKENS_AFTER, report.tokens_after);
    span.record(semconv::COMPACTION_TARGET, report.target_tokens);
    span.record(semconv::COMPACTION_REACHED, report.reached);
    span.record(semconv::COMPACTION_SKIPPED, report.skipped);
    span.record(semconv::COMPACTION_TIERS, tiers_used(report).as_str());
    span.record(semconv::COMPACTION_REASON, report.reason.as_str());
    span.record(
        semconv::COMPACTION_SUMMARIZER_CALLS,
        report.summarizer.calls,
    );
}

/// The tiers a compaction used, e.g. `truncate,mask,summarize`; `none` when nothing ran.
fn tiers_used(report: &CompactionReport) -> String {
    let t = &report.tiers;
    let used: Vec<&str> = [
        ("truncate", t.truncated),
        ("mask", t.masked + t.display_only_removed),
        ("summarize", t.per_message_summarized + t.segment_summaries),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(name, _)| name)
    .collect();
    if used.is_empty() {
        "none".into()
    } else {
        used.join(",")
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

    async fn handle_job(
        &mut self,
        job: JobRequest,
        ctx: &AgentContext,
    ) -> Result<JobReply, AgentError> {
        let trace = job.trace();
        let job = match job.open::<CompactionJob>() {
            Ok((job, reply)) => {
                let span = compaction_span(&job.agent, &ctx.name, job.trigger.as_str());
                let result = self.compact(job, &trace, ctx).instrument(span).await;
                return Ok(reply.answer(result));
            }
            Err(job) => job,
        };
        // A compaction from another node: the same job, without the asker's model and cache.
        let job = match job.open::<RemoteCompactionJob>() {
            Ok((job, reply)) => {
                let job = CompactionJob::from(job);
                let span = compaction_span(&job.agent, &ctx.name, job.trigger.as_str());
                let result = self.compact(job, &trace, ctx).instrument(span).await;
                let result = result
                    .map(RemoteCompaction::from)
                    .map_err(|e| e.to_string());
                return Ok(reply.answer(result));
            }
            Err(job) => job,
        };
        match job.open::<ScopeSummaryJob>() {
            Ok((job, reply)) => {
                let span = compaction_span(&job.agent, &ctx.name, "scope");
                span.record(semconv::SCOPE, job.label.as_str());
                let summary = summarize_scope(&job, &ctx.name).instrument(span).await;
                Ok(reply.answer(summary))
            }
            Err(job) => Err(job.refuse(&ctx.name)),
        }
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }

    /// Nothing to keep (its anti-thrash guards start afresh after a restart): the first,
    /// empty checkpoint stays right, and a compaction job costs no checkpoint at all.
    fn update_checkpoint(&self, _checkpoint: &mut Checkpoint) {}

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
