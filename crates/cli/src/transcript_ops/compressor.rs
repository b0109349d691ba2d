//! [`Compressor`]: a team holding one compression agent, so that compacting a transcript file
//! takes the same road as a live agent's compaction — a [`CompactionRequest`] through the
//! compaction client to the compression agent (its model's tool loop, the anti-thrash guard,
//! the planner), in a `compaction` span.

use std::sync::Arc;

use troupe_agents::compression::CompressionConfig;
use troupe_agents::compression::{CompactionCaller, CompactionRequest, CompressorModel, InProcess};
use troupe_agents::{CompactionAskError, TeamBuilderExt};
use troupe_compaction::Compaction;
use troupe_protocol::{ChatModel, TraceContext};
use troupe_runtime::Team;
use troupe_tokens::{TokenCache, TokenCounter};

use super::TranscriptOpError;

/// A running compression agent of its own team.
pub struct Compressor {
    team: Team,
    /// Counts tokens for the compaction's announcement (and a compaction on this node, which a
    /// team with its own compression agent never needs).
    counter: Arc<dyn TokenCounter>,
    /// Per-message counts shared across this compressor's jobs: a replay recounts only what
    /// is new since the last compaction.
    token_cache: TokenCache,
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
        let mut config = CompressionConfig::new(counter.clone());
        config.model = model.map_or(CompressorModel::None, CompressorModel::Fixed);
        // Through the builder, as every team troupe starts: its switches (`TROUPE_CASSETTES`)
        // reach the compressor's model too.
        let team = Team::builder()
            .compression(config)
            .start()
            .await
            .map_err(|e| TranscriptOpError::Team(e.to_string()))?;
        Ok(Compressor {
            team,
            counter,
            token_cache: TokenCache::new(),
        })
    }

    /// Compact one conversation through the compression agent (its own token counts are
    /// this compressor's shared cache). The work is traced under the caller's current span.
    ///
    /// # Errors
    /// [`TranscriptOpError::Compaction`] when the compaction fails (nothing changed), and
    /// [`TranscriptOpError::Team`] when the compression agent cannot be reached.
    pub async fn compact(
        &self,
        request: CompactionRequest,
    ) -> Result<Compaction, TranscriptOpError> {
        let request = CompactionRequest {
            in_process: InProcess {
                agent_model: None,
                token_cache: Some(self.token_cache.clone()),
                agent_tools: Vec::new(),
                ..InProcess::default()
            },
            ..request
        };
        let caller = CompactionCaller {
            directory: self.team.directory(),
            events: self.team.events(),
            trace: TraceContext::new_root(),
            counter: self.counter.as_ref(),
        };
        match troupe_agents::compression::compact(&caller, request).await {
            Ok(compaction) => Ok(compaction),
            Err(CompactionAskError::Failed(e)) => Err(TranscriptOpError::Compaction(e)),
            Err(e) => Err(TranscriptOpError::Team(e.to_string())),
        }
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
