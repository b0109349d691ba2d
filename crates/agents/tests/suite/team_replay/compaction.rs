//! The compression agent summarising with an agent's own model asks on that agent's cassette:
//! its calls are recorded and replayed in a queue of their own, beside the agent's.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use troupe_agents::compression::{COMPRESSION_AGENT, CompressionConfig, CompressorModel};
use troupe_agents::{AgentSpec, CompactionSettings, TeamBuilderExt, WorkAhead, shared_counter};
use troupe_models::{Cassettes, ScriptedModel, ScriptedReply};
use troupe_protocol::{ChatModel, ChatRequest, ChatStream, Event, ModelError, ModelInfo};
use troupe_runtime::Team;
use troupe_tools::{NoArgs, ToolError, ToolRegistry};

use crate::suite::support::compression::{SUMMARY, big, policy};
use crate::suite::support::events::drain;

/// The coder's model: its turns from a script, the compressor's calls answered with a summary.
struct Coder {
    turns: ScriptedModel,
    summaries: ScriptedModel,
}

#[async_trait]
impl ChatModel for Coder {
    fn info(&self) -> ModelInfo {
        self.turns.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        if request.agent.as_deref() == Some(COMPRESSION_AGENT) {
            self.summaries.chat_stream(request).await
        } else {
            self.turns.chat_stream(request).await
        }
    }
}

fn coder_model() -> Arc<dyn ChatModel> {
    let script = (0..8)
        .map(|_| ScriptedReply::call("read_big", "{}"))
        .chain([ScriptedReply::text("done")]);
    Arc::new(Coder {
        turns: ScriptedModel::new("coder", script).with_context_window(4_000),
        summaries: ScriptedModel::new("coder", []).with_fallback(SUMMARY),
    })
}

/// A coder that reads big files until its conversation is compacted, with the compressor on the
/// coder's own model (the default). Blocking compaction: a compaction in the background lands
/// between turns when it is done, which is a matter of timing, not of model answers.
async fn run(model: Arc<dyn ChatModel>, cassettes: &Cassettes) -> (String, Vec<Value>) {
    run_with(model, CompressorModel::AgentsOwn, cassettes).await
}

/// [`run`] with the compressor summarising with `compressor`.
async fn run_with(
    model: Arc<dyn ChatModel>,
    compressor: CompressorModel,
    cassettes: &Cassettes,
) -> (String, Vec<Value>) {
    let mut tools = ToolRegistry::new();
    tools
        .register_fn("read_big", "Read a big file.", |_: NoArgs| async move {
            Ok::<_, ToolError>(big(40))
        })
        .unwrap();
    let settings = CompactionSettings {
        policy: Some(policy()),
        work_ahead: WorkAhead::Off,
        ..CompactionSettings::default()
    };
    let team = Team::builder()
        .compression(CompressionConfig {
            model: compressor,
            ..CompressionConfig::new(shared_counter())
        })
        .agent(
            AgentSpec::new("coder", model)
                .tools(tools)
                .compaction(settings)
                .max_turns(12),
        )
        .cassettes(cassettes.clone())
        .start()
        .await
        .unwrap();
    let mut events = team.subscribe();
    let answer = team.ask("coder", "read everything").await.unwrap();
    let events = drain(&mut events)
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                Event::CompactionFinished { .. } | Event::ModelCallStarted { .. }
            )
        })
        .map(|e| without_wall_times(serde_json::to_value(&e).unwrap()))
        .collect();
    team.shutdown().await;
    (answer, events)
}

/// `value` without its wall times (`ms`, a report's `duration_ms`), at any depth.
fn without_wall_times(mut value: Value) -> Value {
    if let Some(object) = value.as_object_mut() {
        object.remove("ms");
        object.remove("duration_ms");
        for field in object.values_mut() {
            *field = without_wall_times(field.take());
        }
    }
    value
}

#[tokio::test]
async fn team_replay_serves_the_compressors_calls_on_the_agents_cassette() {
    let dir = tempfile::tempdir().unwrap();
    let recording = Cassettes::record(dir.path());
    let recorded = run(coder_model(), &recording).await;
    assert_eq!(recorded.0, "done");
    assert!(
        recorded
            .1
            .iter()
            .any(|e| e["type"] == "compaction_finished"),
        "{:?}",
        recorded.1
    );
    let askers: Vec<String> = std::fs::read_to_string(recording.path("coder"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["agent"].to_string())
        .collect();
    assert!(askers.contains(&"\"compressor\"".to_string()), "{askers:?}");
    assert!(askers.contains(&"\"coder\"".to_string()), "{askers:?}");

    let replaying = Cassettes::replay(dir.path());
    let unreachable: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("none", []));
    let replayed = run(unreachable, &replaying).await;
    replaying.verify().unwrap();
    assert_eq!(replayed, recorded);
}

/// A compression model of its own records to `compressor.jsonl`, and replays from it.
#[tokio::test]
async fn team_replay_gives_a_compression_model_of_its_own_the_compressors_cassette() {
    let dir = tempfile::tempdir().unwrap();
    let summaries = || {
        let model = ScriptedModel::new("summarizer", []).with_fallback(SUMMARY);
        CompressorModel::Fixed(Arc::new(model))
    };
    let recording = Cassettes::record(dir.path());
    let recorded = run_with(coder_model(), summaries(), &recording).await;
    let compressor = std::fs::read_to_string(recording.path(COMPRESSION_AGENT)).unwrap();
    let calls: Vec<Value> = compressor
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!calls.is_empty());
    assert!(calls.iter().all(|c| c["agent"] == COMPRESSION_AGENT));
    let coder = std::fs::read_to_string(recording.path("coder")).unwrap();
    assert!(!coder.contains("\"agent\":\"compressor\""), "{coder}");

    let replaying = Cassettes::replay(dir.path());
    let unreachable = || Arc::new(ScriptedModel::new("none", [])) as Arc<dyn ChatModel>;
    let replayed = run_with(
        unreachable(),
        CompressorModel::Fixed(unreachable()),
        &replaying,
    )
    .await;
    replaying.verify().unwrap();
    assert_eq!(replayed, recorded);
}
