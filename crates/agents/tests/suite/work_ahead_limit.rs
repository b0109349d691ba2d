//! Work ahead, at the trigger and at the limit. Past the trigger the agent goes on while its
//! job runs (starting one if none does). At the limit its next request would not fit the
//! window and no background answer has landed. By default it makes room at once on its own node, without a
//! model (`AtLimit::MakeRoom`), dropping the job in flight as stale; told to wait
//! (`AtLimit::Wait`) it joins the job in flight, never starting a second.
//!
//! The compression agent's model answers only once the test opens its gate: an agent that
//! asked it for anything at the limit would hang there.

use std::time::Duration;

use troupe_agents::{AgentSpec, AtLimit, CompactionSettings, LlmAgent, spawn_agent};
use troupe_protocol::{CompactTrigger, CompactionMode, Event};
use troupe_runtime::Team;

use super::support::events::drain;
use super::support::gated::gated_team;
use super::support::work_ahead::{
    applied, archive_of, ask_until_background, assert_sound, background_started, big, coder,
    messages_of, settings, until_compaction_ends,
};

/// An ask that must come back while the compressor's gate is shut: a wait on the job would
/// never end.
pub(super) async fn ask_without_waiting(team: &Team, text: String) -> String {
    tokio::time::timeout(Duration::from_secs(30), team.ask("coder", text))
        .await
        .expect("the agent waited on the compaction in flight")
        .unwrap()
}

#[tokio::test]
async fn past_the_trigger_the_agent_goes_on_while_the_job_runs() {
    let (team, gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder()).compaction(settings()),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    let mut heard = ask_until_background(&team, &mut events).await;
    // Past the trigger (80 % of 8k with the answer's room), short of the window: the job is
    // still shut behind the gate, and the agent answers anyway.
    let answer = ask_without_waiting(&team, format!("big:\n{}", big(80))).await;
    assert_eq!(answer, "noted.");
    heard.extend(drain(&mut events));
    assert!(
        heard
            .iter()
            .any(|e| matches!(e, Event::ContextWarning { .. })),
        "{heard:?}"
    );
    assert_eq!(
        heard
            .iter()
            .filter(|e| matches!(e, Event::CompactionStarted { .. }))
            .count(),
        1,
        "one compaction, the one in flight: {heard:?}"
    );
    assert!(applied(&heard).is_empty(), "{heard:?}");
    // Once the job ends, the next turn boundary takes its answer without waiting on anything.
    gate.add_permits(1_000);
    heard.extend(until_compaction_ends(&mut events).await);
    team.ask("coder", "after").await.unwrap();
    heard.extend(drain(&mut events));
    assert_eq!(
        applied(&heard),
        vec![(CompactionMode::Background, true, None)]
    );
    assert_sound(&messages_of(&team), &archive_of(&team));
    team.shutdown().await;
}

#[tokio::test]
async fn crossing_the_trigger_in_one_step_starts_a_job_without_waiting() {
    let (team, gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder()).compaction(settings()),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    team.ask("coder", "hello").await.unwrap();
    assert!(drain(&mut events).iter().all(|e| !background_started(e)));
    // From far below the warning to past the trigger (short of the window) in one message: no
    // job was ahead, one starts now, and the agent does not wait for it.
    let answer = ask_without_waiting(&team, format!("big:\n{}", big(300))).await;
    assert_eq!(answer, "noted.");
    let heard = drain(&mut events);
    assert_eq!(
        heard.iter().filter(|e| background_started(e)).count(),
        1,
        "{heard:?}"
    );
    assert!(applied(&heard).is_empty(), "{heard:?}");
    gate.add_permits(1_000);
    team.shutdown().await;
}

fn blocking_started(event: &Event) -> bool {
    matches!(
        event,
        Event::CompactionStarted {
            mode: CompactionMode::Blocking,
            trigger: CompactTrigger::Automatic,
            ..
        }
    )
}

/// The events of the agent's compactions in `mode`, by kind, in order.
fn course(events: &[Event], mode: CompactionMode) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::CompactionStarted { mode: m, .. } if *m == mode => Some("started"),
            Event::CompactionFinished { mode: m, .. } if *m == mode => Some("finished"),
            Event::CompactionFailed {
                mode: m, reason, ..
            } if *m == mode => Some(if reason.contains("cancelled") {
                "cancelled"
            } else {
                "failed"
            }),
            Event::CompactionApplied { mode: m, .. } if *m == mode => Some("applied"),
            _ => None,
        })
        .collect()
}

/// The request the agent would send now, reserve included, fits the window.
async fn fits(team: &Team) {
    let stats = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap();
    let reserve = CompactionSettings::default().output_reserve_for(None, stats.window);
    assert!(
        stats.tokens + reserve <= stats.window,
        "{} tokens and a {reserve}-token reserve in a {}-token window",
        stats.tokens,
        stats.window
    );
}

#[tokio::test]
async fn reaching_the_limit_makes_room_at_once_and_drops_the_job_in_flight() {
    let (team, gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder()).compaction(settings()),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    let mut heard = ask_until_background(&team, &mut events).await;
    // Past the window while the job is shut behind the gate: the agent answers all the same.
    let answer = ask_without_waiting(&team, format!("big:\n{}", big(200))).await;
    assert_eq!(answer, "noted.");
    heard.extend(drain(&mut events));
    assert_eq!(heard.iter().filter(|e| blocking_started(e)).count(), 1);
    // The room was made on the agent's own node, and the job in flight dropped as stale at
    // once, before it landed.
    let taken = applied(&heard);
    assert_eq!(taken.len(), 2, "{heard:?}");
    assert_eq!(
        taken[0].0,
        CompactionMode::Blocking,
        "made room first: {taken:?}"
    );
    assert!(taken[0].1, "{taken:?}");
    let (mode, done, reason) = &taken[1];
    assert_eq!(*mode, CompactionMode::Background);
    assert!(!done, "the stale job was applied: {taken:?}");
    assert!(
        reason.as_deref().is_some_and(|r| r.contains("stale")),
        "{taken:?}"
    );
    // Two compactions of one agent in flight at once, told apart by the mode each event names:
    // the room made ran its course, the job was cancelled before it was dropped.
    assert_eq!(
        course(&heard, CompactionMode::Blocking),
        ["started", "finished", "applied"]
    );
    assert_eq!(
        course(&heard, CompactionMode::Background),
        ["started", "cancelled", "applied"]
    );
    fits(&team).await;
    let messages = messages_of(&team);
    assert!(
        messages.iter().any(|m| m.text().contains("line 199")),
        "the newest message was compacted away"
    );
    assert_sound(&messages, &archive_of(&team));
    // The dropped job's answer, once the gate opens, is never applied.
    gate.add_permits(1_000);
    team.ask("coder", "after").await.unwrap();
    let late = drain(&mut events);
    assert!(applied(&late).iter().all(|(_, done, _)| !done), "{late:?}");
    assert_sound(&messages_of(&team), &archive_of(&team));
    team.shutdown().await;
}

#[tokio::test]
async fn one_step_past_the_limit_with_no_job_makes_room_without_a_model() {
    let (team, gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder()).compaction(settings()),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    // Short of the warning: no job is ahead.
    for i in 0..12 {
        team.ask("coder", format!("part {i}:\n{}", big(15)))
            .await
            .unwrap();
    }
    let heard = drain(&mut events);
    assert!(!heard.iter().any(background_started), "{heard:?}");
    // One message from below the warning to past the window.
    let answer = ask_without_waiting(&team, format!("big:\n{}", big(300))).await;
    assert_eq!(answer, "noted.");
    let heard = drain(&mut events);
    assert_eq!(heard.iter().filter(|e| blocking_started(e)).count(), 1);
    assert!(
        applied(&heard).contains(&(CompactionMode::Blocking, true, None)),
        "{heard:?}"
    );
    fits(&team).await;
    assert_sound(&messages_of(&team), &archive_of(&team));
    gate.add_permits(1_000);
    team.shutdown().await;
}

/// Told to wait at the limit, the agent joins the job in flight.
fn waiting() -> CompactionSettings {
    CompactionSettings {
        at_limit: AtLimit::Wait,
        ..settings()
    }
}

#[tokio::test]
async fn reaching_the_limit_joins_the_job_in_flight() {
    let (team, gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder()).compaction(waiting()),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    let mut heard = ask_until_background(&team, &mut events).await;
    // A message that takes the request past the window while the job still runs: the agent
    // must wait, and joins the job in flight rather than starting a second.
    let text = format!("big:\n{}", big(200));
    {
        let mut asking = std::pin::pin!(team.ask("coder", text));
        let early = tokio::time::timeout(Duration::from_millis(300), &mut asking).await;
        assert!(
            early.is_err(),
            "the agent went past the window without waiting"
        );
        gate.add_permits(1_000);
        assert_eq!(asking.await.unwrap(), "noted.");
    }
    heard.extend(drain(&mut events));
    let started = heard.iter().position(background_started).unwrap();
    let landed = heard
        .iter()
        .position(|e| {
            matches!(
                e,
                Event::CompactionApplied {
                    mode: CompactionMode::Background,
                    ..
                }
            )
        })
        .expect("the background compaction was applied");
    assert!(
        !heard[started + 1..landed]
            .iter()
            .any(|e| matches!(e, Event::CompactionStarted { .. })),
        "a second compaction started while one was in flight: {heard:?}"
    );
    assert!(
        matches!(
            heard[landed],
            Event::CompactionApplied { applied: true, .. }
        ),
        "{heard:?}"
    );
    assert_eq!(heard.iter().filter(|e| background_started(e)).count(), 1);
    assert_sound(&messages_of(&team), &archive_of(&team));
    team.shutdown().await;
}
