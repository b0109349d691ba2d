//! The budget check after every model turn and tool batch, and the compaction client: every
//! compaction this agent asks for — automatic, `/compact`, its `compact` tool, emergency — is a
//! [`CompactionJob`] to the compression agent, applied here when it comes back.

use troupe_compaction::{BudgetState, CompactTrigger};
use troupe_runtime::{AgentContext, ChatMessage, Event, Job, MessageId, MessageKind};

use crate::agent_jobs::{AppliedCompaction, COMPACTION_TIMEOUT, CompactError, CompactionTracker};
use crate::compression::{COMPRESSION_AGENT, CompactionJob};

use super::LlmAgent;

impl LlmAgent {
    /// After each model turn and tool batch: warn at the warning threshold, compact at the trigger.
    pub(super) async fn check_budget(&mut self, ctx: &AgentContext, trace_id: &str) {
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
                    && let Err(e) = self.compact(CompactTrigger::Automatic, None, ctx).await
                {
                    tracing::warn!(agent = %ctx.name, error = %e, "automatic compaction did not run");
                }
            }
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

    /// Ask the compression agent to compact this conversation and apply the result.
    pub(super) async fn compact(
        &mut self,
        trigger: CompactTrigger,
        instructions: Option<String>,
        ctx: &AgentContext,
    ) -> Result<AppliedCompaction, CompactError> {
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
            trigger,
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
                    .map(ChatMessage::text);
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
