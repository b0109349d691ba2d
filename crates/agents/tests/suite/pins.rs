//! An agent's pinned messages (#33): injected after the system prompt or pinned at run time,
//! never compacted, and still pinned after a session-log resume (not injected twice).

use std::path::Path;
use std::sync::Arc;

use troupe_agents::{AgentSpec, CompactionSettings, LlmAgent, PinError, spawn_agent};
use troupe_compaction::ContextPolicy;
use troupe_models::ScriptedModel;
use troupe_protocol::{ChatMessage, MessageId, MessageKind, Role};
use troupe_session::load;

use super::support::compression::team;

const RULES: &str = "Project rules: never force-push; every change gets a test.";

fn coder(log: &Path) -> AgentSpec {
    let model = Arc::new(ScriptedModel::new("m", []).with_fallback("noted."));
    AgentSpec::new("coder", model)
        .instructions("You are a coding agent.")
        .pin(ChatMessage::user(RULES))
        .session(log)
        .compaction(CompactionSettings {
            policy: Some(ContextPolicy {
                protected_recent: 2,
                ..ContextPolicy::for_window(6_000)
            }),
            auto: false,
            ..CompactionSettings::default()
        })
}

fn big(i: usize) -> String {
    (0..40)
        .map(|n| format!("part {i} line {n}: text the agent was given to read\n"))
        .collect()
}

#[tokio::test]
async fn pinned_rules_survive_a_compaction_and_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");

    let team1 = team().await;
    spawn_agent(&team1, coder(&log)).await.unwrap();
    for i in 0..5 {
        team1.ask("coder", big(i)).await.unwrap();
    }
    let applied = team1
        .agent::<LlmAgent>("coder")
        .compact(None)
        .await
        .unwrap();
    assert!(applied.report.archived > 0, "{}", applied.report.reason);
    team1.shutdown().await;

    let session = load(&log).unwrap();
    let messages = session.conversation.to_messages();
    assert_eq!(messages[0].role, Role::System);
    // The rules: right after the system prompt, pinned, byte-identical.
    assert_eq!(messages[1].text(), RULES);
    assert!(messages[1].pinned);
    assert_eq!(messages[1].kind, MessageKind::Normal);
    // The task (the first request) is still there behind them: protected as the task.
    assert!(messages[2].text().starts_with("part 0"));
    assert!(messages.iter().any(|m| m.kind == MessageKind::Summary));

    // Resumed: the pin is still on, and the rules are not injected a second time.
    let team2 = team().await;
    spawn_agent(&team2, coder(&log)).await.unwrap();
    team2.ask("coder", "one more").await.unwrap();
    team2.shutdown().await;
    let resumed = load(&log).unwrap().conversation.to_messages();
    let rules: Vec<&ChatMessage> = resumed.iter().filter(|m| m.text() == RULES).collect();
    assert_eq!(rules.len(), 1);
    assert!(rules[0].pinned);
    assert_eq!(rules[0].id, messages[1].id);
}

#[tokio::test]
async fn a_message_pinned_at_run_time_survives_compaction_and_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let team = team().await;
    spawn_agent(&team, coder(&log)).await.unwrap();
    for i in 0..5 {
        team.ask("coder", big(i)).await.unwrap();
    }
    // An old answer, which a compaction would otherwise fold into its summary.
    let before = load(&log).unwrap().conversation.to_messages();
    let old = before
        .iter()
        .find(|m| m.role == Role::Assistant)
        .unwrap()
        .clone();
    team.agent::<LlmAgent>("coder")
        .pin(old.id, true)
        .await
        .unwrap();
    assert_eq!(
        team.agent::<LlmAgent>("coder")
            .pin(MessageId(9_999), true)
            .await,
        Err(PinError::UnknownMessage(MessageId(9_999)))
    );
    // Written at once: the log holds the pin before any compaction.
    let logged = load(&log).unwrap().conversation;
    assert!(logged.get(old.id).unwrap().pinned);

    let applied = team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    assert!(applied.report.archived > 0, "{}", applied.report.reason);
    team.shutdown().await;
    let after = load(&log).unwrap().conversation;
    let kept = after.get(old.id).unwrap();
    assert!(kept.pinned);
    assert_eq!(kept.text(), old.text());
}
