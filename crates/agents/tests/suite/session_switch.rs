//! `/resume SESSION` as a job the agent handles: it continues from another session log while
//! its team keeps running, and lets go of the one it had.

use std::path::Path;
use std::sync::Arc;

use troupe_agents::{AgentSpec, LlmAgent, SwitchError, spawn_agent};
use troupe_models::ScriptedModel;
use troupe_protocol::Conversation;
use troupe_runtime::TeamError;
use troupe_session::load;

use super::support::compression::team;

fn coder(log: &Path) -> AgentSpec {
    AgentSpec::new(
        "coder",
        Arc::new(ScriptedModel::new("m", []).with_fallback("ok")),
    )
    .session(log)
}

fn texts(conversation: &Conversation) -> Vec<String> {
    conversation.messages().iter().map(|m| m.text()).collect()
}

/// Whether another agent, in another team, can take the log at `path` now.
async fn is_free(path: &Path) -> Result<(), TeamError> {
    let other = team().await;
    let taken = spawn_agent(&other, coder(path)).await;
    other.shutdown().await;
    taken
}

#[tokio::test]
async fn resuming_another_log_moves_the_agent_and_its_restarts_there() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    let earlier = team().await;
    spawn_agent(&earlier, coder(&b)).await.unwrap();
    earlier.ask("coder", "in b").await.unwrap();
    earlier.shutdown().await;

    let team = team().await;
    spawn_agent(&team, coder(&a)).await.unwrap();
    team.ask("coder", "in a").await.unwrap();
    assert_eq!(
        team.agent::<LlmAgent>("coder")
            .switch_session(&b)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        texts(&team.checkpoint("coder").unwrap().conversation),
        ["in b", "ok"]
    );

    // The old log kept its last turn and is free; the new one is held.
    assert_eq!(texts(&load(&a).unwrap().conversation), ["in a", "ok"]);
    is_free(&a).await.unwrap();
    let held = is_free(&b).await.unwrap_err().to_string();
    assert!(held.contains("is in use by process"), "{held}");

    // A restart rebuilds the agent on the log it switched to, not the one its spec names.
    let crashed = team
        .with_agent::<LlmAgent, (), _>("coder", |_| panic!("crash on purpose"))
        .await;
    assert!(crashed.is_err(), "{crashed:?}");
    team.ask("coder", "after").await.unwrap();
    team.shutdown().await;
    assert_eq!(
        texts(&load(&b).unwrap().conversation),
        ["in b", "ok", "after", "ok"]
    );
    assert_eq!(texts(&load(&a).unwrap().conversation), ["in a", "ok"]);
}

#[tokio::test]
async fn a_refused_resume_leaves_the_agent_and_both_logs_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let team = team().await;
    spawn_agent(&team, coder(&a)).await.unwrap();
    team.ask("coder", "in a").await.unwrap();
    let before = team.checkpoint("coder").unwrap().conversation;

    // A corrupt log: refused with its line, left byte for byte.
    let corrupt = dir.path().join("corrupt.jsonl");
    std::fs::write(&corrupt, "{not json\n").unwrap();
    let error = team
        .agent::<LlmAgent>("coder")
        .switch_session(&corrupt)
        .await
        .unwrap_err();
    assert!(matches!(error, SwitchError::Session(_)), "{error:?}");
    assert!(error.to_string().contains("corrupt.jsonl:1"), "{error}");
    assert_eq!(std::fs::read(&corrupt).unwrap(), b"{not json\n");

    // A log another agent keeps: refused as in use.
    let busy = dir.path().join("busy.jsonl");
    let other = super::support::compression::team().await;
    spawn_agent(&other, coder(&busy)).await.unwrap();
    let error = team
        .agent::<LlmAgent>("coder")
        .switch_session(&busy)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("is in use by process"),
        "{error}"
    );
    other.shutdown().await;

    // The agent still has its conversation and keeps writing to its own log.
    assert_eq!(team.checkpoint("coder").unwrap().conversation, before);
    team.ask("coder", "still a").await.unwrap();
    team.shutdown().await;
    assert_eq!(
        texts(&load(&a).unwrap().conversation),
        ["in a", "ok", "still a", "ok"]
    );
}

#[tokio::test]
async fn an_agent_without_a_session_log_cannot_resume_one() {
    let dir = tempfile::tempdir().unwrap();
    let team = team().await;
    let spec = AgentSpec::new(
        "coder",
        Arc::new(ScriptedModel::new("m", []).with_fallback("ok")),
    );
    spawn_agent(&team, spec).await.unwrap();
    let error = team
        .agent::<LlmAgent>("coder")
        .switch_session(dir.path().join("x.jsonl"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, SwitchError::NoSession(ref name) if name == "coder"),
        "{error:?}"
    );
    assert!(!dir.path().join("x.jsonl").exists());
    team.shutdown().await;
}
