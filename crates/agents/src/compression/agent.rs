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
//!
//! The agent's mailbox only queues jobs: each is answered later, through its port, by a worker
//! (`workers.rs`), up to [`CompressionConfig::max_concurrent`] at once, the most urgent first
//! and never two of one agent at once (`schedule.rs`); a newer compaction of an agent whose
//! older one still waits takes its place. So one compression agent serves the whole team, and
//! an agent close to its limit is not held up behind another's work ahead.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint, JobRequest,
};

use crate::compression::config::CompressionConfig;
use crate::compression::job::CompressorJob;
use crate::compression::task::{Compressor, CompressorTask};
use crate::compression::workers::Workers;

/// The name the compression agent has in every team.
pub const COMPRESSION_AGENT: &str = "compressor";

/// The compression agent's behaviour.
pub struct CompressionAgent {
    config: CompressionConfig,
    /// What its jobs share, made at the first job (its name and bus come with the job).
    compressor: Option<Arc<Compressor>>,
    workers: Workers<CompressorTask>,
}

impl CompressionAgent {
    /// A compression agent.
    pub fn new(config: CompressionConfig) -> Self {
        CompressionAgent {
            workers: Workers::new(config.max_concurrent),
            config,
            compressor: None,
        }
    }

    /// The factory the supervisor uses to (re)build it.
    pub fn factory(config: CompressionConfig) -> BehaviorFactory {
        Arc::new(move |_checkpoint| {
            Ok(Box::new(CompressionAgent::new(config.clone())) as Box<dyn AgentBehavior>)
        })
    }

    fn compressor(&mut self, ctx: &AgentContext) -> Arc<Compressor> {
        let config = &self.config;
        Arc::clone(self.compressor.get_or_insert_with(|| {
            Arc::new(Compressor {
                config: config.clone(),
                guards: Mutex::default(),
                name: ctx.name.clone(),
                events: ctx.events.clone(),
            })
        }))
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
        let compressor = self.compressor(ctx);
        // Queued, not run: a worker answers the port. The task keeps the asker's span.
        let task = match job.open::<CompressorJob>(&ctx.name)? {
            // From this team or, by its wire form, from another node: the same road.
            CompressorJob::Compact(request, reply) => {
                CompressorTask::compact(compressor, request, reply, trace)
            }
            CompressorJob::SummarizeScope(request, reply) => {
                CompressorTask::scope(compressor, request, reply, trace)
            }
            CompressorJob::Hurry(hurry, reply) => {
                reply.send(self.workers.hurry(&hurry.agent, hurry.room));
                return Ok(());
            }
        };
        self.workers.submit(task);
        Ok(())
    }

    /// The jobs it took end with it: queued ones are dropped, running ones cancelled.
    async fn stop(&mut self, _ctx: &AgentContext) {
        self.workers.stop().await;
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }

    /// Nothing to keep (its anti-thrash guards start afresh after a restart): the first,
    /// empty checkpoint stays right, and a compaction job costs no checkpoint at all.
    fn update_checkpoint(&self, _checkpoint: &mut Checkpoint) {}
}
