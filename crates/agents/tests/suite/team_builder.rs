//! `Team::builder()`: a team with its compression agent and agents in one expression.

use std::sync::Arc;

use troupe_agents::compression::{COMPRESSION_AGENT, CompressionConfig};
use troupe_agents::{AgentSpec, TeamBuildError, TeamBuilderExt, shared_counter};
use troupe_models::ScriptedModel;
use troupe_runtime::Team;

fn spec(name: &str, answer: &str) -> AgentSpec {
    AgentSpec::new(
        name,
        Arc::new(ScriptedModel::new(name, []).with_fallback(answer)),
    )
}

#[tokio::test]
async fn the_builder_starts_the_compression_agent_and_every_agent() {
    let team = Team::builder()
        .compression(CompressionConfig::new(shared_counter()))
        .agent(spec("a", "from a"))
        .agent(spec("b", "from b"))
        .start()
        .await
        .unwrap();
    assert!(team.directory().is_live(COMPRESSION_AGENT));
    assert_eq!(team.ask("a", "hi").await.unwrap(), "from a");
    assert_eq!(team.ask("b", "hi").await.unwrap(), "from b");
    team.shutdown().await;
}

#[tokio::test]
async fn a_duplicate_name_is_an_error_naming_the_agent() {
    let err = Team::builder()
        .agent(spec("a", "1"))
        .agent(spec("a", "2"))
        .start()
        .await
        .unwrap_err();
    match err {
        TeamBuildError::Agent { name, .. } => assert_eq!(name, "a"),
        other => panic!("{other}"),
    }
}
