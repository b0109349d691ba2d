//! A compaction working ahead when the team shuts down is in the trace: `Team::shutdown`
//! returns once the job has ended, so its `compaction` span — and the request's spans above
//! it, which a child keeps open — are written before the trace is flushed.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Semaphore;
use troupe::protocol::trace::SpanLine;
use troupe::protocol::{ChatModel, ChatRequest, ChatStream, ModelError, ModelInfo};

use super::support::trace::{block_on, spans};
use super::support::with_trace_file;

/// A compression model that never answers: its compaction ends only by being cancelled.
struct ClosedGate {
    inner: troupe::models::ScriptedModel,
    gate: Arc<Semaphore>,
}

#[async_trait]
impl ChatModel for ClosedGate {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let _open = self.gate.acquire().await;
        self.inner.chat_stream(request).await
    }
}

#[test]
fn a_compaction_still_working_ahead_at_shutdown_ends_cancelled_in_the_trace() {
    use troupe::agents::compression::{CompressionConfig, CompressorModel};
    use troupe::agents::{
        AgentSpec, CompactionSettings, WorkAhead, shared_counter, spawn_agent,
        spawn_compression_agent,
    };
    use troupe::compaction::ContextPolicy;
    use troupe::models::ScriptedModel;
    use troupe::protocol::{CompactionMode, Event};
    use troupe::runtime::{Team, TeamConfig};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    with_trace_file(&path, false, || {
        block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let mut config = CompressionConfig::new(shared_counter());
            config.model = CompressorModel::Fixed(Arc::new(ClosedGate {
                inner: ScriptedModel::new("compressor-model", []).with_fallback("done."),
                gate: Arc::new(Semaphore::new(0)),
            }));
            spawn_compression_agent(&team, config).await.unwrap();
            let model = Arc::new(ScriptedModel::new("coder", []).with_fallback("noted."));
            let spec = AgentSpec::new("coder", model).compaction(CompactionSettings {
                policy: Some(ContextPolicy {
                    target: 0.1,
                    tool_output_limit_tokens: 100_000,
                    ..ContextPolicy::for_window(8_000)
                }),
                work_ahead: WorkAhead::AtWarning,
                recall_tool: false,
                ..CompactionSettings::default()
            });
            spawn_agent(&team, spec).await.unwrap();
            let mut events = team.subscribe();
            let part = "line: some text the agent was given to keep in mind\n".repeat(4);
            let mut started = false;
            for i in 0..100 {
                team.ask("coder", format!("part {i}:\n{part}"))
                    .await
                    .unwrap();
                while let Ok(record) = events.try_recv() {
                    started |= matches!(
                        record.event,
                        Event::CompactionStarted {
                            mode: CompactionMode::Background,
                            ..
                        }
                    );
                }
                if started {
                    break;
                }
            }
            assert!(started, "no background compaction started");
            team.shutdown().await;
        })
    });

    let spans = spans(&path);
    let by_id: HashMap<&str, &SpanLine> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let compaction = spans
        .iter()
        .find(|s| s.name == "compaction")
        .unwrap_or_else(|| {
            panic!(
                "the compaction's span ended before shutdown returned: {:?}",
                spans.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()
            )
        });
    assert_eq!(
        compaction.attributes["troupe.compaction.mode"],
        "background"
    );
    assert_eq!(
        compaction.attributes["troupe.compaction.reason"],
        "cancelled"
    );
    assert_eq!(
        compaction.attributes["troupe.compaction.outcome"],
        "cancelled"
    );
    assert_eq!(compaction.status, "error");
    assert_eq!(compaction.attributes["error.type"], "cancelled");
    assert!(compaction.attributes["troupe.compaction.tokens_before"].is_u64());
    assert!(compaction.attributes["troupe.compaction.waited_ms"].is_u64());
    // The request whose turn started it is in the trace too.
    let parent = by_id[compaction.parent_span_id.as_deref().unwrap()];
    assert_eq!(parent.name, "invoke_agent");
    assert_eq!(parent.trace_id, compaction.trace_id);
}
