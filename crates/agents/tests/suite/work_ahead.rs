//! Work ahead: past the work-ahead threshold the agent has a snapshot of its conversation
//! compacted in the background and goes on; the answer is spliced in at a later turn boundary
//! (the messages appended meanwhile kept as they are), dropped when stale, left running past
//! the trigger, and lost with an agent that crashes, never half applied. Where the agent
//! meets the trigger and the limit is `work_ahead_limit.rs`.
//!
//! The compression agent's model answers only once the test opens its gate, so the test
//! decides when the background answer lands.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use troupe_agents::{AgentSpec, LlmAgent, spawn_agent};
use troupe_compaction::expand;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{
    ChatModel, ChatRequest, ChatStream, CompactionMode, Event, MessageKind, ModelError, ModelInfo,
    Role,
};

use super::support::events::drain;
use super::support::gated::gated_team;
use super::support::work_ahead::{
    applied, archive_of, ask_parts_until, ask_until_background, assert_sound, big, coder,
    messages_of, settings, until_compaction_ends,
};

/// An agent model that panics when the conversation holds `boom` (its actor dies and the
/// supervisor restarts it from its checkpoint), and otherwise answers "noted.".
struct PanickyModel(ScriptedModel);

#[async_trait]
impl ChatModel for PanickyModel {
    fn info(&self) -> ModelInfo {
        self.0.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        if request.messages.iter().any(|m| m.text() == "boom") {
            panic!("the model blew up");
        }
        self.0.chat_stream(request).await
    }
}

#[tokio::test]
async fn the_splice_keeps_the_messages_appended_while_the_compaction_ran() {
    let (team, gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder()).compaction(settings()),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    ask_until_background(&team, &mut events).await;
    let in_flight = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap()
        .in_flight
        .expect("/context shows the compaction in flight");
    // Two exchanges while the compressor works: the agent does not wait.
    for turn in ["meanwhile one", "meanwhile two"] {
        assert_eq!(team.ask("coder", turn).await.unwrap(), "noted.");
    }
    let before = messages_of(&team);
    let appended = before[in_flight.messages..].to_vec();
    assert_eq!(appended.len(), 4, "{appended:?}");
    assert!(applied(&drain(&mut events)).is_empty(), "applied too early");

    gate.add_permits(1_000);
    until_compaction_ends(&mut events).await;
    team.ask("coder", "after").await.unwrap();
    let heard = drain(&mut events);
    assert_eq!(
        applied(&heard),
        [(CompactionMode::Background, true, None)],
        "{heard:?}"
    );

    let after = messages_of(&team);
    // The compacted prefix, then what was appended meanwhile — same ids, same text — then
    // the last request.
    let tail = &after[after.len() - appended.len() - 2..after.len() - 2];
    assert_eq!(tail, &appended[..]);
    assert_eq!(after[after.len() - 2].text(), "after");
    assert!(
        after.iter().any(|m| m.kind != MessageKind::Normal),
        "the prefix was compacted"
    );
    assert!(after.len() < before.len() + 2);
    // The archive gives back the conversation exactly.
    let archive = archive_of(&team);
    assert_sound(&after, &archive);
    let restored = expand(&after[..after.len() - 2], &archive).unwrap();
    assert_eq!(restored, before);
    assert!(
        team.agent::<LlmAgent>("coder")
            .context_stats()
            .await
            .unwrap()
            .in_flight
            .is_none()
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_snapshot_is_never_taken_with_a_tool_call_open() {
    let (team, _gate) = gated_team().await;
    let mut tools = troupe_tools::ToolRegistry::new();
    tools
        .register_fn("note", "Note something.", |_: troupe_tools::NoArgs| async {
            Ok::<_, troupe_tools::ToolError>("ok".to_string())
        })
        .unwrap();
    // Each request: a call whose arguments are large (the request crosses the threshold as the
    // call is made, while it is open), then the answer.
    let args = serde_json::json!({ "text": big(6) }).to_string();
    let script = (0..60).flat_map(|_| {
        [
            ScriptedReply::call("note", args.clone()),
            ScriptedReply::text("noted."),
        ]
    });
    let model = Arc::new(ScriptedModel::new("coder", script));
    spawn_agent(
        &team,
        AgentSpec::new("coder", model)
            .tools(tools)
            .compaction(settings()),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    ask_until_background(&team, &mut events).await;
    let in_flight = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap()
        .in_flight
        .unwrap();
    let messages = messages_of(&team);
    let snapshot = &messages[..in_flight.messages];
    let last_call = snapshot
        .iter()
        .rposition(|m| m.role == Role::Assistant && !m.calls().is_empty())
        .unwrap();
    for call in snapshot[last_call].calls() {
        assert!(
            snapshot[last_call + 1..]
                .iter()
                .any(|m| m.tool_call_id.as_deref() == Some(call.id.as_str())),
            "the snapshot ends with call {} open",
            call.id
        );
    }
    team.shutdown().await;
}

#[tokio::test]
async fn a_stale_answer_is_dropped_and_the_conversation_left_alone() {
    // Cleared meanwhile.
    let (team, gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder()).compaction(settings()),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    ask_until_background(&team, &mut events).await;
    team.agent::<LlmAgent>("coder").clear().await.unwrap();
    gate.add_permits(1_000);
    until_compaction_ends(&mut events).await;
    team.ask("coder", "fresh start").await.unwrap();
    let heard = drain(&mut events);
    let dropped = applied(&heard);
    assert_eq!(dropped.len(), 1, "{heard:?}");
    let (mode, done, reason) = &dropped[0];
    assert_eq!((*mode, *done), (CompactionMode::Background, false));
    assert!(reason.as_deref().unwrap().contains("cleared"), "{reason:?}");
    let texts: Vec<String> = messages_of(&team).iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["fresh start", "noted."]);
    team.shutdown().await;

    // Compacted by `/compact` meanwhile.
    let (team, gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder()).compaction(settings()),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    ask_until_background(&team, &mut events).await;
    let open = async {
        gate.add_permits(1_000);
    };
    let coder = team.agent::<LlmAgent>("coder");
    let (manual, ()) = tokio::join!(coder.compact(None), open);
    manual.unwrap();
    let compacted = messages_of(&team);
    team.ask("coder", "go on").await.unwrap();
    let heard = drain(&mut events);
    let background: Vec<_> = applied(&heard)
        .into_iter()
        .filter(|(mode, ..)| *mode == CompactionMode::Background)
        .collect();
    assert_eq!(background.len(), 1, "{heard:?}");
    assert!(!background[0].1, "{background:?}");
    let after = messages_of(&team);
    assert_eq!(&after[..compacted.len()], &compacted[..]);
    assert_eq!(after.len(), compacted.len() + 2);
    team.shutdown().await;
}

#[tokio::test]
async fn a_crash_while_a_job_is_in_flight_loses_nothing_and_applies_nothing() {
    let (team, gate) = gated_team().await;
    let model = Arc::new(PanickyModel(
        ScriptedModel::new("coder", []).with_fallback("noted."),
    ));
    spawn_agent(&team, AgentSpec::new("coder", model).compaction(settings()))
        .await
        .unwrap();
    let mut events = team.subscribe();
    ask_until_background(&team, &mut events).await;
    let committed = messages_of(&team);

    let failed = team.ask("coder", "boom").await.unwrap_err().to_string();
    assert!(failed.contains("restarted"), "{failed}");
    gate.add_permits(1_000);
    // The lost job ends (its task stopped with the agent that would have applied it).
    until_compaction_ends(&mut events).await;
    let heard = drain(&mut events);
    assert!(
        applied(&heard).iter().all(|(_, done, _)| !done),
        "the lost job was applied: {heard:?}"
    );
    // The restarted agent has every committed message, and nothing half applied.
    let restarted = messages_of(&team);
    assert_eq!(restarted, committed);
    assert_sound(&restarted, &archive_of(&team));
    team.ask("coder", "after").await.unwrap();
    let after = messages_of(&team);
    let restored = expand(&after, &archive_of(&team)).unwrap();
    assert_eq!(&restored[..committed.len()], &committed[..]);
    team.shutdown().await;
}

#[tokio::test]
async fn a_spliced_compaction_is_logged_as_one_and_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let (team, gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder())
            .compaction(settings())
            .session(&log),
    )
    .await
    .unwrap();
    let mut events = team.subscribe();
    ask_until_background(&team, &mut events).await;
    team.ask("coder", "meanwhile").await.unwrap();
    let compactions_before = logged_compactions(&log);
    gate.add_permits(1_000);
    until_compaction_ends(&mut events).await;
    team.ask("coder", "after").await.unwrap();
    let heard = drain(&mut events);
    assert_eq!(
        applied(&heard),
        [(CompactionMode::Background, true, None)],
        "{heard:?}"
    );
    assert_eq!(logged_compactions(&log), compactions_before + 1);
    let live = team.checkpoint("coder").unwrap().conversation;
    team.shutdown().await;

    let (team, _gate) = gated_team().await;
    spawn_agent(
        &team,
        AgentSpec::new("coder", coder())
            .compaction(settings())
            .session(&log),
    )
    .await
    .unwrap();
    let loaded = team.checkpoint("coder").unwrap().conversation;
    assert_eq!(loaded.to_messages(), live.to_messages());
    team.shutdown().await;
}

/// How many compaction records the session log holds.
fn logged_compactions(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|line| line.contains(r#""type":"compaction""#))
        .count()
}

/// The anti-thrash guard skips a work-ahead job that would free too little; the agent tries
/// again a step later (not after every turn, not only at the trigger), so the compaction still
/// runs in the background instead of blocking at the trigger.
#[tokio::test]
async fn a_job_the_guard_skipped_is_tried_again_before_the_trigger() {
    let (team, gate) = gated_team().await;
    gate.add_permits(1_000);
    let mut settings = settings();
    if let Some(policy) = settings.policy.as_mut() {
        // At the warning (70 % of the window less the reserve) about 3,500 tokens are
        // freeable here: the first job is skipped.
        policy.min_freeable_tokens = 3_800;
    }
    spawn_agent(&team, AgentSpec::new("coder", coder()).compaction(settings))
        .await
        .unwrap();
    let mut events = team.subscribe();
    let compacted = |heard: &[Event]| {
        heard.iter().any(|e| {
            matches!(e, Event::CompactionFinished { report, .. } if !report.skipped
                && !report.no_compaction_needed)
        })
    };
    let heard = ask_parts_until(&team, &mut events, 12, compacted).await;
    assert!(compacted(&heard), "nothing was compacted: {heard:?}");
    let starts: Vec<CompactionMode> = heard
        .iter()
        .filter_map(|e| match e {
            Event::CompactionStarted { mode, .. } => Some(*mode),
            _ => None,
        })
        .collect();
    let skipped = heard
        .iter()
        .filter(|e| matches!(e, Event::CompactionFinished { report, .. } if report.skipped))
        .count();
    assert!(skipped >= 1, "the guard skipped no job: {heard:?}");
    assert!(
        starts.iter().all(|m| *m == CompactionMode::Background) && starts.len() > skipped,
        "tried again in the background, never blocking: {starts:?}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_job_that_changed_nothing_gives_its_ids_back() {
    let (team, gate) = gated_team().await;
    gate.add_permits(1_000);
    let mut settings = settings();
    if let Some(policy) = settings.policy.as_mut() {
        // Never enough to free: every job is skipped by the guard.
        policy.min_freeable_tokens = 100_000;
    }
    spawn_agent(&team, AgentSpec::new("coder", coder()).compaction(settings))
        .await
        .unwrap();
    let mut events = team.subscribe();
    let skipped = |heard: &[Event]| {
        heard
            .iter()
            .any(|e| matches!(e, Event::CompactionFinished { report, .. } if report.skipped))
    };
    let heard = ask_parts_until(&team, &mut events, 4, skipped).await;
    assert!(skipped(&heard), "no job was skipped: {heard:?}");
    // Let the skipped job's task hand its answer over (it has nothing left to wait for).
    tokio::time::sleep(Duration::from_millis(200)).await;
    team.ask("coder", "one more").await.unwrap();
    let messages = messages_of(&team);
    let at = messages
        .iter()
        .rposition(|m| m.text() == "one more")
        .unwrap();
    // The request found the skipped answer first and gave the compaction's loan back: its
    // message takes the id right after the last one, as if no job had run.
    assert_eq!(messages[at].id.0, messages[at - 1].id.0 + 1, "{messages:?}");
    team.shutdown().await;
}
