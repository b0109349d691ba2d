//! Prompt-cache token counts at the collector: what the `chat` spans say was read from and
//! written to the provider's cache, summed per agent and model in the GenAI usage counters.

use super::*;
use troupe::AgentSpec;
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::prelude::TeamBuilderExt;
use troupe::protocol::{
    ChatModel, ChatRequest, ChatStream, ModelError, ModelInfo, Usage, stream_response,
};

/// A scripted model whose every answer reports the usage a provider with a prompt cache
/// reports: `usage`, whatever the script's own estimate was.
struct CachingModel {
    script: ScriptedModel,
    usage: Usage,
}

#[async_trait::async_trait]
impl ChatModel for CachingModel {
    fn info(&self) -> ModelInfo {
        self.script.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let mut response = self.script.chat(request).await?;
        response.usage = self.usage;
        Ok(stream_response(response, 16))
    }
}

/// Two calls of an agent whose provider read 1024 and wrote 100 prompt tokens each: the
/// counters hold the sums; the token histogram still has only input and output points, the
/// cached tokens inside the input ones.
#[test]
fn cache_reads_and_writes_are_counted_per_agent_and_model() {
    let collector = start_collector();
    let (layer, export) = otlp_layer::<Registry>(&collector.config_with_metrics())
        .unwrap()
        .unwrap();
    let usage = Usage {
        input_tokens: 1200,
        output_tokens: 7,
        cache_read_input_tokens: 1024,
        cache_creation_input_tokens: 100,
    };
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let model = CachingModel {
                    script: ScriptedModel::new("cached-model", [])
                        .with_fallback("Oslo.")
                        .with_context_window(100_000),
                    usage,
                };
                // And one agent whose provider says nothing of a cache.
                let plain = ScriptedModel::new("plain-model", [ScriptedReply::text("Bergen.")]);
                let team = Team::builder()
                    .agent(AgentSpec::new("geo", Arc::new(model)))
                    .agent(AgentSpec::new("plain", Arc::new(plain)))
                    .start()
                    .await
                    .unwrap();
                for _ in 0..2 {
                    team.ask("geo", "Capital of Norway?").await.unwrap();
                }
                team.ask("plain", "A town?").await.unwrap();
                team.shutdown().await;
            });
    });
    export.shutdown().unwrap();

    let metrics = collector.metrics();
    let by = [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.agent.name", "geo"),
        ("gen_ai.request.model", "cached-model"),
    ];
    for (name, sum) in [
        (
            "gen_ai.client.inference.usage.cache_read.input_tokens",
            2048,
        ),
        (
            "gen_ai.client.inference.usage.cache_write.input_tokens",
            200,
        ),
    ] {
        assert_eq!(
            metrics.get(&(name.to_string(), pairs(&by))),
            Some(&Point::Sum(sum)),
            "{name} in {metrics:#?}"
        );
        // No cache reported, no cache counted.
        assert!(
            !metrics
                .keys()
                .any(|(n, attributes)| n == name && attributes.iter().any(|(_, v)| v == "plain")),
            "{metrics:#?}"
        );
    }
    let token_types: Vec<&str> = metrics
        .keys()
        .filter(|(name, _)| name == "gen_ai.client.token.usage")
        .flat_map(|(_, attributes)| attributes.iter())
        .filter(|(key, _)| key == "gen_ai.token.type")
        .map(|(_, value)| value.as_str())
        .collect();
    assert_eq!(token_types, ["input", "output", "input", "output"]);
    let mut input = by.to_vec();
    input.push(("gen_ai.token.type", "input"));
    assert_eq!(
        metrics.get(&("gen_ai.client.token.usage".to_string(), pairs(&input))),
        Some(&Point::Histogram {
            count: 2,
            sum: 2400.0
        })
    );
}
