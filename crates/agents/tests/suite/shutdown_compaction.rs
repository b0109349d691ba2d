//! Shutdown with a compaction working ahead: `Team::shutdown` returns only once the job has
//! ended. A job still running is cancelled (its `CompactionFailed` and `CompactionApplied`
//! say so, and the session log holds the conversation as the last request left it, nothing
//! half applied); an answer that came but had no turn boundary yet is spliced in and written.
//!
//! The compression agent's model answers only once the test opens its gate.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, broadcast};
use troupe_agents::{AgentSpec, CompactionSettings, WorkAhead, spawn_agent};
use troupe_compaction::ContextPolicy;
use troupe_models::ScriptedModel;
use troupe_protocol::{ChatMessage, CompactionMode, Event, EventRecord, MessageKind};
use troupe_runtime::Team;
use troupe_session::load;

use super::support;
use super::support::events::drain;

/// A gated team with `coder`, working ahead at the warning of an 8k window, its session in
/// `log`.
async fn gated_team(log: &Path) -> (Team, Arc<Semaphore>) {
    let (team, gate) = support::gated::gated_team().await;
    let coder = Arc::new(ScriptedModel::new("coder", []).with_fallback("noted."));
    let spec = AgentSpec::new("coder", coder)
        .session(log)
        .compaction(CompactionSettings {
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
    (team, gate)
}

/// Ask short parts until a background compaction starts.
async fn until_background(team: &Team, events: &mut broadcast::Receiver<EventRecord>) {
    let part: String = (0..4)
        .map(|i| format!("line {i}: some text the agent was given to keep in mind\n"))
        .collect();
    for i in 0..60 {
        team.ask("coder", format!("part {i}:\n{part}"))
            .await
            .unwrap();
        let started = drain(events).iter().any(|e| {
            matches!(
                e,
                Event::CompactionStarted {
                    mode: CompactionMode::Background,
                    ..
                }
            )
        });
        if started {
            return;
        }
    }
    panic!("no background compaction started");
}

/// The `CompactionApplied`s among `events`: mode, applied, reason.
fn applied(events: &[Event]) -> Vec<(CompactionMode, bool, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::CompactionApplied {
                mode,
                applied,
                reason,
                ..
            } => Some((*mode, *applied, reason.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn shutdown_cancels_a_compaction_still_running_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let (team, _gate) = gated_team(&log).await;
    let mut events = team.subscribe();
    until_background(&team, &mut events).await;
    let before: Vec<ChatMessage> = team.checkpoint("coder").unwrap().conversation.to_messages();

    // The gate stays shut: the job can only end by being cancelled.
    team.shutdown().await;
    let heard = drain(&mut events);
    let failed: Vec<&String> = heard
        .iter()
        .filter_map(|e| match e {
            Event::CompactionFailed { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "{heard:?}");
    assert!(failed[0].contains("cancelled"), "{failed:?}");
    let applied = applied(&heard);
    assert_eq!(applied.len(), 1, "{heard:?}");
    let (mode, was_applied, reason) = &applied[0];
    assert_eq!(*mode, CompactionMode::Background);
    assert!(!was_applied);
    assert!(
        reason.as_deref().unwrap().contains("cancelled"),
        "{reason:?}"
    );
    assert!(
        !heard
            .iter()
            .any(|e| matches!(e, Event::CompactionFinished { .. })),
        "{heard:?}"
    );

    // The session log holds the conversation as the last request left it.
    let written = load(&log).unwrap().conversation.to_messages();
    assert_eq!(written, before);
}

#[tokio::test]
async fn an_answer_that_came_before_shutdown_is_spliced_in_and_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let (team, gate) = gated_team(&log).await;
    let mut events = team.subscribe();
    until_background(&team, &mut events).await;
    let before = team.checkpoint("coder").unwrap().conversation.len();

    gate.add_permits(1_000);
    // The answer comes; no request follows to land it at its turn boundary.
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("the compaction ended")
            .unwrap()
            .event;
        match event {
            Event::CompactionFinished { .. } => break,
            Event::CompactionFailed { reason, .. } => panic!("failed: {reason}"),
            _ => {}
        }
    }
    team.shutdown().await;
    let heard = drain(&mut events);
    let applied = applied(&heard);
    assert_eq!(
        applied,
        [(CompactionMode::Background, true, None)],
        "{heard:?}"
    );

    let written = load(&log).unwrap().conversation;
    assert!(written.len() < before, "{} of {before}", written.len());
    assert!(
        written
            .messages()
            .iter()
            .any(|m| m.kind == MessageKind::Summary),
        "the compacted conversation was written"
    );
}
