//! The compaction client's promise: whatever route a compaction takes — this team's compression
//! agent, one on another node, or the agent's own node when that node cannot be reached — the
//! asking agent's team hears exactly one `CompactionStarted` and then exactly one
//! `CompactionFinished` or `CompactionFailed`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use troupe_agents::compression::CompressionConfig;
use troupe_agents::compression::CompressorModel;
use troupe_agents::{
    AgentSpec, CompactionAskError, CompactionSettings, LlmAgent, shared_counter, spawn_agent,
    spawn_compression_agent,
};
use troupe_compaction::ContextPolicy;
use troupe_models::ScriptedModel;
use troupe_protocol::{Event, EventRecord, TraceContext};
use troupe_runtime::{AgentRequest, AskError, RemoteAgents, Team, TeamConfig};

use super::support::gated::gated_team;

/// How the cluster a team joined answers for the compression agent.
#[derive(Clone, Copy)]
enum Cluster {
    /// No node has one.
    NoCompressor,
    /// Node `far` has one, and it cannot be reached.
    CompressorDown,
    /// Node `far` has one, and it answers that the compaction failed.
    CompressorFails,
}

#[async_trait]
impl RemoteAgents for Cluster {
    fn locate(&self, name: &str) -> Option<String> {
        match self {
            Cluster::NoCompressor => None,
            _ => (name == troupe_agents::compression::COMPRESSION_AGENT).then(|| "far".to_string()),
        }
    }
    fn names(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    async fn ask(&self, _: &str, _: AgentRequest, _: Duration) -> Result<String, AskError> {
        Err(AskError::NodeDown { node: "far".into() })
    }
    async fn ask_job(
        &self,
        _: &str,
        _: &str,
        _: String,
        _: TraceContext,
        _: Duration,
    ) -> Result<String, AskError> {
        match self {
            Cluster::CompressorFails => Ok(r#"{"Err":"the model went away"}"#.into()),
            _ => Err(AskError::NodeDown { node: "far".into() }),
        }
    }
    async fn send(&self, _: &str, _: AgentRequest) -> Result<(), AskError> {
        Err(AskError::NodeDown { node: "far".into() })
    }
}

fn big(n: usize) -> String {
    (0..n)
        .map(|i| format!("line {i}: some text the agent was given to keep in mind\n"))
        .collect()
}

/// A team whose agent `coder` has a conversation worth compacting, reaching its compression
/// agent the way `cluster` says (`None`: its own compression agent).
async fn team(cluster: Option<Cluster>) -> Team {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    match cluster {
        None => {
            let mut config = CompressionConfig::new(shared_counter());
            config.model = CompressorModel::None;
            spawn_compression_agent(&team, config).await.unwrap();
        }
        Some(cluster) => assert!(team.directory().set_remote(Arc::new(cluster))),
    }
    let model = Arc::new(ScriptedModel::new("coder", []).with_fallback("noted."));
    let settings = CompactionSettings {
        policy: Some(ContextPolicy {
            tool_output_limit_tokens: 100_000,
            ..ContextPolicy::for_window(8_000)
        }),
        ..CompactionSettings::default()
    };
    spawn_agent(&team, AgentSpec::new("coder", model).compaction(settings))
        .await
        .unwrap();
    for i in 0..4 {
        let text = format!("part {i}:\n{}", big(30));
        team.ask("coder", text).await.unwrap();
    }
    team
}

/// The compaction events `coder`'s team heard, in order.
fn heard(events: &mut broadcast::Receiver<EventRecord>) -> Vec<&'static str> {
    let mut heard = Vec::new();
    while let Ok(record) = events.try_recv() {
        match record.event {
            Event::CompactionStarted { agent, .. } if agent == "coder" => heard.push("started"),
            Event::CompactionFinished { agent, .. } if agent == "coder" => heard.push("finished"),
            Event::CompactionFailed { agent, .. } if agent == "coder" => heard.push("failed"),
            _ => {}
        }
    }
    heard
}

#[tokio::test]
async fn the_local_route_announces_one_start_and_one_finish() {
    let team = team(None).await;
    let mut events = team.subscribe();
    team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    assert_eq!(heard(&mut events), ["started", "finished"]);
    team.shutdown().await;
}

#[tokio::test]
async fn the_own_node_fallback_announces_one_start_and_one_finish() {
    for cluster in [Cluster::NoCompressor, Cluster::CompressorDown] {
        let team = team(Some(cluster)).await;
        let mut events = team.subscribe();
        let applied = team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
        assert!(
            applied
                .report
                .fallbacks
                .iter()
                .any(|f| f.contains("compacted by the agent's own node")),
            "{:?}",
            applied.report.fallbacks
        );
        assert_eq!(heard(&mut events), ["started", "finished"]);
        team.shutdown().await;
    }
}

#[tokio::test]
async fn a_remote_compressor_that_fails_is_announced_as_one_failure() {
    let team = team(Some(Cluster::CompressorFails)).await;
    let before = team.checkpoint("coder").unwrap().conversation;
    let mut events = team.subscribe();
    let err = team
        .agent::<LlmAgent>("coder")
        .compact(None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CompactionAskError::Ask(AskError::Remote { node, reason })
            if node == "far" && reason.contains("the model went away")),
        "{err}"
    );
    assert_eq!(heard(&mut events), ["started", "failed"]);
    assert_eq!(team.checkpoint("coder").unwrap().conversation, before);
    team.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_compaction_is_announced_as_one_failure_and_lets_the_next_one_run() {
    let (team, gate) = gated_team().await;
    let settings = CompactionSettings {
        policy: Some(ContextPolicy {
            target: 0.1,
            tool_output_limit_tokens: 100_000,
            ..ContextPolicy::for_window(8_000)
        }),
        auto: false,
        ..CompactionSettings::default()
    };
    let model = Arc::new(ScriptedModel::new("coder", []).with_fallback("noted."));
    spawn_agent(&team, AgentSpec::new("coder", model).compaction(settings))
        .await
        .unwrap();
    // Many short parts: the protected tail is small, so the compaction has work to do.
    for i in 0..20 {
        team.ask("coder", format!("part {i}:\n{}", big(8)))
            .await
            .unwrap();
    }
    let before = team.checkpoint("coder").unwrap().conversation;
    let mut events = team.subscribe();
    let mut started = team.subscribe();

    // Cancel once the compaction is under way (its model waits at the gate).
    let cancel = CancellationToken::new();
    let coder = team.agent::<LlmAgent>("coder");
    let compaction = coder.compact_cancellable(None, cancel.clone());
    let canceller = async {
        while !matches!(
            started.recv().await.unwrap().event,
            Event::CompactionStarted { .. }
        ) {}
        cancel.cancel();
    };
    let (outcome, ()) = tokio::join!(compaction, canceller);
    assert_eq!(outcome.unwrap_err(), CompactionAskError::Cancelled);
    assert_eq!(heard(&mut events), ["started", "failed"]);
    assert_eq!(team.checkpoint("coder").unwrap().conversation, before);

    // The abandoned compaction let go of the tracker: the next one runs, announced once.
    gate.add_permits(1_000);
    team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    assert_eq!(heard(&mut events), ["started", "finished"]);
    team.shutdown().await;
}
