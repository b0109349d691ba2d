//! Work ahead, at the limit: the agent's next request would not fit the window and no
//! background answer has landed. By default it makes room at once on its own node, without a
//! model (`AtLimit::MakeRoom`), dropping the job in flight as stale; told to wait
//! (`AtLimit::Wait`) it joins the job in flight, never starting a second.
//!
//! The compression agent's model answers only once the test opens its gate: an agent that
//! asked it for anything at the limit would hang there.

use std::time::Duration;

use troupe_agents::{AgentSpec, AtLimit, CompactionSettings, context_stats, spawn_agent};
use troupe_runtime::{CompactTrigger, CompactionMode, Event, Team};

use super::work_ahead::{
    applied, archive_of, ask_until_background, ask_without_waiting, assert_sound,
    background_started, big, coder, drain, gated_team, messages_of, settings,
};

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

/// The request the agent would send now, reserve included, fits the window.
async fn fits(team: &Team) {
    let stats = context_stats(team, "coder").await.unwrap();
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
