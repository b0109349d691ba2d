//! The budget check after every model turn and tool batch (the one before every model call is
//! `precall.rs`), and the compaction client: every
//! compaction this agent asks for — automatic, `/compact`, its `compact` tool, emergency — is a
//! [`CompactionJob`] to the compression agent, applied here when it comes back.

use tracing::Instrument;
use troupe_compaction::{BudgetState, CompactTrigger, Compaction, CompactionError};
use troupe_runtime::{AgentContext, AskError, Event, Job, MessageId, MessageKind};

use crate::agent_jobs::{
    AppliedCompaction, COMPACTION_TIMEOUT, CompactError, CompactionTracker, CompressorRoute,
};
use crate::compression::{
    COMPRESSION_AGENT, CompactionJob, RemoteCompactionJob, compact_here, compaction_span,
    record_report,
};

use super::LlmAgent;
use crate::CompactionSettings;

impl LlmAgent {
    /// After each model turn and tool batch: warn at the warning threshold, compact at the trigger.
    /// Like the check before every model call, the trigger measures a request with the room its
    /// answer needs (the output reserve), so both compact at the same point; the warning is
    /// about the context itself (the tokens it reports).
    pub(super) async fn check_budget(&mut self, ctx: &AgentContext, trace_id: &str) {
        // The request carries the tool definitions too: they count against the window.
        let tools = self.request_tool_tokens();
        let reserve = self.output_reserve();
        let warning = self.policy.warning_tokens();
        let trigger = self.policy.trigger_tokens();
        // Far below both thresholds, bounds settle it: the turn's new messages are tokenized
        // only once the conversation could be near one (and then once each, cached).
        let quiet_below = warning
            .saturating_sub(tools)
            .min(trigger.saturating_sub(tools + reserve));
        if quiet_below > 0
            && self.token_cache.certainly_below(
                self.counter.as_ref(),
                self.conversation.messages(),
                quiet_below,
            )
        {
            self.warned = false;
            return;
        }
        let tokens = self.tokens() + tools;
        // Tool definitions and reserve alone past the trigger: no compaction can bring the
        // request under it (said once per set of tools before the model call), so none is run
        // after every turn, nor warned about again.
        let due = tokens + reserve >= trigger && tools + reserve < trigger;
        if !due && self.policy.state(tokens) == BudgetState::Ok {
            self.warned = false;
            return;
        }
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
        if due
            && self.spec.compaction.auto
            && let Err(e) = self.compact(CompactTrigger::Automatic, None, ctx).await
        {
            tracing::warn!(agent = %ctx.name, error = %e, "automatic compaction did not run");
        }
    }

    /// Give the compression agent a job as part of the request being handled (same trace).
    pub(super) async fn ask_compressor<J: Job>(
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

    /// Give the compaction to the compression agent on `node`; when it cannot be reached, compact
    /// here instead (the caller applies either result the same way).
    async fn ask_remote_compressor(
        &self,
        job: CompactionJob,
        node: &str,
        ctx: &AgentContext,
    ) -> Result<Result<Compaction, CompactionError>, AskError> {
        let wire = RemoteCompactionJob::from(&job);
        let answer = ctx
            .directory
            .ask_wire_job(
                COMPRESSION_AGENT,
                wire,
                self.trace.child(),
                COMPACTION_TIMEOUT,
            )
            .await;
        match answer {
            Ok(Ok(compaction)) => {
                let compaction = Compaction::from(compaction);
                // The compressor announced it on its own node's bus; this team's watchers
                // hear it here.
                self.publish_compaction(&compaction, ctx);
                Ok(Ok(compaction))
            }
            Ok(Err(reason)) => Err(AskError::Remote {
                node: node.to_string(),
                reason: format!("its compression agent failed: {reason}"),
            }),
            Err(e) => {
                let why = format!("the compression agent on node `{node}` was not reached: {e}");
                Ok(self.compact_here(&job, &why, ctx).await)
            }
        }
    }

    /// Compact on this node with the planner and the mechanical summarizer, because no
    /// compression agent could be reached (`why` goes into the report's fallbacks).
    async fn compact_here(
        &self,
        job: &CompactionJob,
        why: &str,
        ctx: &AgentContext,
    ) -> Result<Compaction, CompactionError> {
        tracing::warn!(agent = %ctx.name, %why, "compacting on this node");
        // The compression agent's own span, filled the same way.
        let span = compaction_span(&ctx.name, "planner (this node)", job.trigger.as_str());
        let result = compact_here(job, self.counter.as_ref(), why)
            .instrument(span.clone())
            .await;
        if let Ok(compaction) = &result {
            span.in_scope(|| record_report(&compaction.report));
            self.publish_compaction(compaction, ctx);
        }
        result
    }

    fn publish_compaction(&self, compaction: &Compaction, ctx: &AgentContext) {
        ctx.events.publish(
            Some(self.trace.trace_id_hex()),
            Event::CompactionFinished {
                agent: ctx.name.clone(),
                report: Box::new(compaction.report.clone()),
            },
        );
    }

    /// Ask the compression agent to compact this conversation and apply the result.
    pub(super) async fn compact(
        &mut self,
        trigger: CompactTrigger,
        instructions: Option<String>,
        ctx: &AgentContext,
    ) -> Result<AppliedCompaction, CompactError> {
        let Some(route) = CompressorRoute::of(&ctx.directory) else {
            return Err(CompactError::NoCompressionAgent);
        };
        let tracker = CompactionTracker::of(&ctx.directory);
        let publish = tracker.begin(&ctx.name);
        let job = CompactionJob {
            agent: ctx.name.clone(),
            conversation: self.conversation.clone(),
            ledger: self.ledger.snapshot(),
            // Every request keeps room for its answer: the compaction leaves it too.
            policy: CompactionSettings::reserving(&self.policy, self.output_reserve()),
            trigger,
            instructions,
            agent_model: Some(self.spec.model.clone()),
            token_cache: Some(self.token_cache.clone()),
        };
        let answer = match route {
            CompressorRoute::Local => self.ask_compressor(job, ctx).await,
            CompressorRoute::Remote(node) => self.ask_remote_compressor(job, &node, ctx).await,
            CompressorRoute::Unreachable => {
                let why = "no node of the cluster has a compression agent";
                Ok(self.compact_here(&job, why, ctx).await)
            }
        };
        let outcome = match answer {
            Ok(Ok(compaction)) => {
                let before: std::collections::HashSet<MessageId> =
                    self.conversation.messages().iter().map(|m| m.id).collect();
                if compaction.changed() {
                    self.keep_for_rollback();
                    compaction.apply_to(&mut self.conversation);
                    self.archive.extend(&compaction.archive);
                }
                let summary = self
                    .conversation
                    .messages()
                    .iter()
                    .rev()
                    .find(|m| m.kind == MessageKind::Summary && !before.contains(&m.id))
                    .map(|m| m.text());
                self.last_compaction = Some(compaction.report.clone());
                self.warned = false;
                Ok(AppliedCompaction {
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
}
