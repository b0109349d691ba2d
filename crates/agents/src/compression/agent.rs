//! [`CompressionAgent`]: the dedicated agent that shrinks conversations to their target.
//!
//! Every compaction in troupe is a [`CompressorJob::Compact`] this agent handles — automatic,
//! `/compact`, the `compact` tool, emergency, a compaction from another node, and the CLI's
//! `compact` and `replay` — and every closed scope is a [`CompressorJob::SummarizeScope`]; the
//! asker's compaction client (`client.rs`) opens the `compaction` span and publishes the events.
//! A compaction runs [`compact_with`](troupe_compaction::compact_with): the anti-thrash guard
//! for automatic triggers, then the model's tool loop over the four compression tools, then the
//! deterministic planner for whatever is left, so the target is met whenever it is reachable.
//! Every result is validated by the compaction crate.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use troupe_compaction::summary::{MechanicalSummarizer, Summarizer};
use troupe_compaction::{CompactOptions, Compaction, CompactionError, ThrashGuard, compact_with};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, ChatModel, Checkpoint,
    JobRequest, TraceContext,
};

use crate::compression::config::CompressionConfig;
use crate::compression::job::{CompactionRequest, CompressorJob};
use crate::compression::model_loop::ModelSteering;
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

    /// Run one compaction. The asker's compaction client opened its `compaction` span (the
    /// actor runs the job inside it) and announces it; this adds the model's steering, the
    /// anti-thrash guard and the summarizer's fallbacks.
    async fn compact(
        &mut self,
        request: CompactionRequest,
        trace: &TraceContext,
        ctx: &AgentContext,
    ) -> Result<Compaction, CompactionError> {
        let model: Option<Arc<dyn ChatModel>> = self
            .config
            .model
            .pick(request.in_process.agent_model.as_ref())
            .map(|m| Arc::new(TracedModel::new(m, ctx.name.clone())) as Arc<dyn ChatModel>);
        let model_summarizer = model.clone().map(ModelSummarizer::new);
        let mechanical = MechanicalSummarizer::new();
        let summarizer: &dyn Summarizer = match &model_summarizer {
            Some(s) => s,
            None => &mechanical,
        };
        let options = CompactOptions {
            focus: request.focus.clone(),
            trigger: request.trigger,
            guard: self.guards.get(&request.agent).copied(),
            token_cache: request.in_process.token_cache.clone(),
            ..CompactOptions::default()
        };
        let steering = ModelSteering {
            model,
            compressor: ctx.name.clone(),
            agent: request.agent.clone(),
            trace_id: trace.id(),
            events: ctx.events.clone(),
            max_iterations: self.config.max_iterations,
        };
        let result = compact_with(
            &request.conversation,
            &request.ledger,
            &request.policy,
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
                    .entry(request.agent.clone())
                    .or_default()
                    .record(&compaction.report);
                Ok(compaction)
            }
            Err(e) => {
                tracing::warn!(agent = %request.agent, error = %e, "compaction failed");
                Err(e)
            }
        }
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

    async fn handle_job(&mut self, job: JobRequest, ctx: &AgentContext) -> Result<(), AgentError> {
        let trace = job.trace();
        match job.open::<CompressorJob>(&ctx.name)? {
            // From this team or, by its wire form, from another node: the same road.
            CompressorJob::Compact(request, reply) => {
                reply.send(self.compact(request, &trace, ctx).await);
            }
            CompressorJob::SummarizeScope(request, reply) => {
                reply.send(summarize_scope(&request, &ctx.name).await);
            }
        }
        Ok(())
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }

    /// Nothing to keep (its anti-thrash guards start afresh after a restart): the first,
    /// empty checkpoint stays right, and a compaction job costs no checkpoint at all.
    fn update_checkpoint(&self, _checkpoint: &mut Checkpoint) {}
}
