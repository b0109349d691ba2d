//! A compression agent held mid-compaction for as long as a test wants.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Semaphore;
use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::{shared_counter, spawn_compression_agent};
use troupe_models::ScriptedModel;
use troupe_protocol::{ChatModel, ChatRequest, ChatStream, ModelError, ModelInfo};
use troupe_runtime::{Team, TeamConfig};

/// A compression model that answers only once its gate is opened.
struct GatedModel {
    inner: ScriptedModel,
    gate: Arc<Semaphore>,
}

#[async_trait]
impl ChatModel for GatedModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let _open = self.gate.acquire().await;
        self.inner.chat_stream(request).await
    }
}

/// A team whose compression agent's model ("done." to everything) waits at the returned gate,
/// shut until the test adds permits.
pub(crate) async fn gated_team() -> (Team, Arc<Semaphore>) {
    let gate = Arc::new(Semaphore::new(0));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(Arc::new(GatedModel {
        inner: ScriptedModel::new("compressor-model", []).with_fallback("done."),
        gate: gate.clone(),
    }));
    spawn_compression_agent(&team, config).await.unwrap();
    (team, gate)
}
