//! An agent that works ahead of its context limit: its settings, its asks and what to check
//! after a background compaction.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use troupe_agents::{CompactionSettings, LlmAgentState, WorkAhead};
use troupe_compaction::{ContextPolicy, expand};
use troupe_models::ScriptedModel;

use super::events::drain;
use troupe_protocol::{ChatMessage, CompactionMode, Event, EventRecord};
use troupe_runtime::Team;

pub(crate) fn big(n: usize) -> String {
    (0..n)
        .map(|i| format!("line {i}: some text the agent was given to keep in mind\n"))
        .collect()
}

/// An 8k window compacted far down (target 10 %): every compaction has work for the model.
pub(crate) fn settings() -> CompactionSettings {
    CompactionSettings {
        policy: Some(ContextPolicy {
            target: 0.1,
            tool_output_limit_tokens: 100_000,
            ..ContextPolicy::for_window(8_000)
        }),
        work_ahead: WorkAhead::AtWarning,
        // The sizes here sit just around the thresholds: no `recall` definition joins the
        // tool list (and the counted tokens) once the first compaction archived something.
        recall_tool: false,
        ..CompactionSettings::default()
    }
}

pub(crate) fn coder() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new("coder", []).with_fallback("noted."))
}

pub(crate) fn background_started(event: &Event) -> bool {
    matches!(
        event,
        Event::CompactionStarted {
            mode: CompactionMode::Background,
            ..
        }
    )
}

/// Ask short parts until a background compaction starts; returns every event heard.
pub(crate) async fn ask_until_background(
    team: &Team,
    events: &mut broadcast::Receiver<EventRecord>,
) -> Vec<Event> {
    let started = |heard: &[Event]| heard.iter().any(background_started);
    let heard = ask_parts_until(team, events, 4, started).await;
    assert!(
        started(&heard),
        "no background compaction started: {heard:?}"
    );
    heard
}

/// Ask parts of `lines` lines each (at most 60) until what was heard satisfies `done`; returns
/// every event heard.
pub(crate) async fn ask_parts_until(
    team: &Team,
    events: &mut broadcast::Receiver<EventRecord>,
    lines: usize,
    done: impl Fn(&[Event]) -> bool,
) -> Vec<Event> {
    let mut heard = Vec::new();
    for i in 0..60 {
        team.ask("coder", format!("part {i}:\n{}", big(lines)))
            .await
            .unwrap();
        heard.extend(drain(events));
        if done(&heard) {
            break;
        }
    }
    heard
}

/// Wait until the compaction of `coder` ended (finished or failed).
pub(crate) async fn until_compaction_ends(
    events: &mut broadcast::Receiver<EventRecord>,
) -> Vec<Event> {
    let mut heard = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("the compaction ended")
            .unwrap()
            .event;
        let ended = matches!(
            event,
            Event::CompactionFinished { .. } | Event::CompactionFailed { .. }
        );
        heard.push(event);
        if ended {
            return heard;
        }
    }
}

/// The `CompactionApplied`s among `events`: mode, applied, reason.
pub(crate) fn applied(events: &[Event]) -> Vec<(CompactionMode, bool, Option<String>)> {
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

pub(crate) fn messages_of(team: &Team) -> Vec<ChatMessage> {
    team.checkpoint("coder").unwrap().conversation.to_messages()
}

pub(crate) fn archive_of(team: &Team) -> troupe_compaction::Archive {
    team.checkpoint("coder")
        .unwrap()
        .state
        .get::<LlmAgentState>()
        .unwrap()
        .archive
        .clone()
}

/// No id twice, and expanding with the archive gives back every original.
pub(crate) fn assert_sound(messages: &[ChatMessage], archive: &troupe_compaction::Archive) {
    let mut ids: Vec<_> = messages.iter().map(|m| m.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), messages.len(), "an id appears twice");
    expand(messages, archive).unwrap();
}
