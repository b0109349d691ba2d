//! [`Compressor`]: a team holding one compression agent, so that compacting a transcript file
//! takes the same road as a live agent's compaction — a typed [`CompactionJob`] handled by the
//! compression agent (its model's tool loop, the anti-thrash guard, the planner).

use std::sync::Arc;

use troupe_agents::compression::CompactionJob;
use troupe_agents::compression::CompressorModel;
use troupe_agents::{
    COMPACTION_TIMEOUT, COMPRESSION_AGENT, CompressionConfig, spawn_compression_agent,
};
use troupe_compaction::tokens::{TokenCache, TokenCounter};
use troupe_compaction::{BudgetPolicy, CompactTrigger, Compaction};
use troupe_runtime::{ChatModel, Conversation, Team, TeamConfig, TraceContext};
use troupe_tools::FileLedger;

use super::TranscriptOpError;

/// A running compression agent of its own team.
pub struct Compressor {
    team: Team,
    /// Per-message counts shared across this compressor's jobs: a replay recounts only what
    /// is new since the last compaction.
    token_cache: TokenCache,
}

/// One conversation to compact and how.
#[derive(Debug, Clone)]
pub struct CompressorJob<'a> {
    /// Whose conversation it is: the compression agent keeps its anti-thrash memory per name.
    pub agent: &'a str,
    /// The conversation to compact; it is copied, never changed in place.
    pub conversation: &'a Conversation,
    /// The files the conversation read and wrote: file lists and mask stubs come from it.
    pub ledger: &'a FileLedger,
    /// The window, thresholds and target the compaction works to.
    pub policy: &'a BudgetPolicy,
    /// What asks for it (automatic triggers are held back by the anti-thrash guard).
    pub trigger: CompactTrigger,
    /// Focus for summaries.
    pub instructions: Option<String>,
}

impl Compressor {
    /// Start a team with a compression agent that summarizes with `model` (`None`: the planner
    /// and the mechanical summarizer only) and counts with `counter`.
    ///
    /// # Errors
    /// [`TranscriptOpError::Team`] when the team or the agent cannot be started.
    pub async fn start(
        model: Option<Arc<dyn ChatModel>>,
        counter: Arc<dyn TokenCounter>,
    ) -> Result<Self, TranscriptOpError> {
        let team = Team::start(TeamConfig::default())
            .await
            .map_err(|e| TranscriptOpError::Team(e.to_string()))?;
        let mut config = CompressionConfig::new(counter);
        config.model = model.map_or(CompressorModel::None, CompressorModel::Fixed);
        spawn_compression_agent(&team, config)
            .await
            .map_err(|e| TranscriptOpError::Team(e.to_string()))?;
        Ok(Compressor {
            team,
            token_cache: TokenCache::new(),
        })
    }

    /// Compact one conversation through the compression agent. The work is traced under the
    /// caller's current span.
    ///
    /// # Errors
    /// [`TranscriptOpError::Compaction`] when the compaction fails (nothing changed), and
    /// [`TranscriptOpError::Team`] when the compression agent cannot be reached.
    pub async fn compact(&self, job: CompressorJob<'_>) -> Result<Compaction, TranscriptOpError> {
        let job = CompactionJob {
            agent: job.agent.to_string(),
            conversation: job.conversation.clone(),
            ledger: job.ledger.clone(),
            policy: job.policy.clone(),
            trigger: job.trigger,
            instructions: job.instructions,
            agent_model: None,
            token_cache: Some(self.token_cache.clone()),
        };
        let answer = self
            .team
            .directory()
            .ask_job(
                COMPRESSION_AGENT,
                job,
                TraceContext::new_root(),
                COMPACTION_TIMEOUT,
            )
            .await
            .map_err(|e| TranscriptOpError::Team(e.to_string()))?;
        Ok(answer?)
    }

    /// The per-message counts this compressor's jobs share. A replay counts its live
    /// conversation with it too, so a compaction finds every message already counted.
    pub(crate) fn token_cache(&self) -> &TokenCache {
        &self.token_cache
    }

    /// Stop the team.
    pub async fn shutdown(self) {
        self.team.shutdown().await;
    }
}
