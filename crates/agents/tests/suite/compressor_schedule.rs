//! One compression agent serves the team: its jobs wait in a queue and run most urgent first
//! (least room left to the hard limit), a newer compaction of an agent replaces its queued
//! older one, up to `max_concurrent` jobs of different agents run at once and never two of one
//! agent, and every call it makes is marked background.

use std::sync::Arc;

use async_trait::async_trait;
use troupe_agents::compression::{
    COMPRESSION_AGENT, CompactionRequest, CompressionConfig, CompressorJob, CompressorModel, Hurry,
};
use troupe_agents::{shared_counter, spawn_compression_agent};
use troupe_compaction::{Compaction, CompactionError, ContextPolicy};
use troupe_protocol::CompactTrigger;
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ChatStream, Conversation, ModelError, ModelInfo,
    RequestPriority, TraceContext,
};
use troupe_runtime::{Directory, Team, TeamConfig};

use super::support::schedule::{
    GateModel, PATIENCE, big, compact, conversation, next_start, request, starts, team,
};

/// Once this returns, every job sent to the compression agent before it has been handled
/// (queued): its mailbox is first in, first out, and a text request is refused at once.
async fn after_the_mailbox(team: &Team) {
    let refused = team.ask(COMPRESSION_AGENT, "ping").await;
    assert!(
        refused.is_err(),
        "the compression agent takes jobs, not text"
    );
}

#[tokio::test]
async fn queued_jobs_run_least_room_first_while_one_worker_is_busy() {
    let (model, log, mut started, gates) = GateModel::new(&["busy"]);
    let team = team(model.clone(), 1).await;
    let busy = tokio::spawn({
        let directory = team.directory().clone();
        async move { compact(&directory, request("busy", 4)).await }
    });
    assert_eq!(next_start(&mut started).await, "busy");
    // Queued in the order roomy, tight, middle while `busy` holds the only worker; joined with
    // a probe that lets `busy` go only once all three are in the queue.
    let (roomy, tight, middle, ()) = tokio::join!(
        compact(team.directory(), request("roomy", 4)),
        compact(team.directory(), request("tight", 6)),
        compact(team.directory(), request("middle", 5)),
        async {
            after_the_mailbox(&team).await;
            gates["busy"].add_permits(1);
        },
    );
    for answer in [roomy, tight, middle, busy.await.unwrap()] {
        assert!(answer.unwrap().report.tokens_after > 0);
    }
    assert_eq!(starts(&log), ["busy", "tight", "middle", "roomy"]);
    // Every call of the compression agent's is background work.
    let priorities = model.priorities.lock().unwrap().clone();
    assert!(!priorities.is_empty());
    assert!(
        priorities.iter().all(|p| *p == RequestPriority::Background),
        "{priorities:?}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_queued_compaction_its_agent_now_waits_for_goes_by_the_room_left_now() {
    let (model, log, mut started, gates) = GateModel::new(&["busy"]);
    let team = team(model, 1).await;
    let busy = tokio::spawn({
        let directory = team.directory().clone();
        async move { compact(&directory, request("busy", 4)).await }
    });
    assert_eq!(next_start(&mut started).await, "busy");
    let hurry = |agent: &str, room| {
        let hurry = Hurry {
            agent: agent.into(),
            room,
        };
        team.directory().ask_job(
            COMPRESSION_AGENT,
            |reply| CompressorJob::Hurry(hurry, reply),
            TraceContext::new_root(),
            PATIENCE,
        )
    };
    // `ahead` worked ahead with plenty of room; it has since reached its limit and waits.
    let (ahead, blocked, ()) = tokio::join!(
        compact(team.directory(), request("ahead", 4)),
        compact(team.directory(), request("blocked", 6)),
        async {
            after_the_mailbox(&team).await;
            assert_eq!(hurry("ahead", -50).await, Ok(true));
            assert_eq!(hurry("nobody", 0).await, Ok(false));
            gates["busy"].add_permits(1);
        },
    );
    assert!(ahead.is_ok() && blocked.is_ok() && busy.await.unwrap().is_ok());
    assert_eq!(starts(&log), ["busy", "ahead", "blocked"]);
    // Running or done: nothing queued to hurry.
    assert_eq!(hurry("ahead", -50).await, Ok(false));
    team.shutdown().await;
}

#[tokio::test]
async fn a_newer_compaction_of_an_agent_replaces_its_queued_older_one() {
    let (model, log, mut started, gates) = GateModel::new(&["busy"]);
    let team = team(model, 1).await;
    let busy = tokio::spawn({
        let directory = team.directory().clone();
        async move { compact(&directory, request("busy", 4)).await }
    });
    assert_eq!(next_start(&mut started).await, "busy");
    let (older, newer, ()) = tokio::join!(
        compact(team.directory(), request("coder", 5)),
        compact(team.directory(), request("coder", 6)),
        async {
            after_the_mailbox(&team).await;
            gates["busy"].add_permits(1);
        },
    );
    assert_eq!(
        older.unwrap_err(),
        CompactionError::Superseded {
            agent: "coder".into()
        }
    );
    let newer = newer.unwrap();
    // The newer one ran, on its own (longer) conversation.
    assert!(newer.report.tokens_before > 0);
    assert!(busy.await.unwrap().is_ok());
    assert_eq!(starts(&log), ["busy", "coder"]);
    team.shutdown().await;
}

#[tokio::test]
async fn two_agents_run_at_once_under_a_limit_of_two_and_one_agent_never_twice() {
    let (model, log, mut started, gates) = GateModel::new(&["a", "b"]);
    let team = team(model, 2).await;
    let run = |agent: &'static str, files: usize| {
        let directory = team.directory().clone();
        tokio::spawn(async move { compact(&directory, request(agent, files)).await })
    };
    let a1 = run("a", 5);
    // a's first compaction is running before its second and b's are sent.
    assert_eq!(next_start(&mut started).await, "a");
    let a2 = run("a", 6);
    let b1 = run("b", 4);
    // b starts while a's first is still held: two jobs at once. a's second, more urgent than
    // b's, waits for a's first, so the free slot went to b.
    assert_eq!(next_start(&mut started).await, "b");
    gates["b"].add_permits(1);
    assert!(b1.await.unwrap().is_ok());
    // a's second, queued by now, still waits: nothing of a's but the first has started.
    after_the_mailbox(&team).await;
    assert_eq!(starts(&log), ["a", "b"]);
    gates["a"].add_permits(2);
    assert!(a1.await.unwrap().is_ok());
    assert!(a2.await.unwrap().is_ok());
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        ["start:a", "start:b", "end:b", "end:a", "start:a", "end:a"]
    );
    team.shutdown().await;
}

/// An agent whose instructions alone are over the target (they are protected): no compaction
/// can reach it, so each one leaves little to free, as in a compaction death spiral.
fn unreachable(extra: &[ChatMessage]) -> CompactionRequest {
    let counter = shared_counter();
    let mut system = String::from("You are a careful engineer. Project notes follow.\n");
    let mut i = 0;
    while counter.count_messages(&[ChatMessage::system(system.clone())]) < 2_200 {
        system.push_str(&format!(
            "note {i}: the build uses cargo and tests live in tests/\n"
        ));
        i += 1;
    }
    let mut messages = conversation(6)
        .messages()
        .iter()
        .map(|m| (**m).clone())
        .collect::<Vec<_>>();
    messages[0] = ChatMessage::system(system);
    messages.extend_from_slice(extra);
    CompactionRequest {
        conversation: Conversation::from_messages(messages),
        policy: ContextPolicy {
            tool_output_limit_tokens: 100_000,
            // The fixed target, out of reach (the cost-aware one would choose a reachable one).
            cost_aware: false,
            ..ContextPolicy::for_window(5_000)
        },
        trigger: CompactTrigger::Automatic,
        ..request("coder", 0)
    }
}

#[tokio::test]
async fn the_anti_thrash_guard_holds_back_automatic_jobs_run_by_the_workers() {
    let (model, _log, _started, _gates) = GateModel::new(&[]);
    let team = team(model, 2).await;
    let first = compact(team.directory(), unreachable(&[])).await.unwrap();
    assert!(
        !first.report.skipped && !first.report.reached,
        "{:?}",
        first.report
    );
    // The compacted conversation and one new exchange, as the automatic (background) trigger
    // sends it: too little new is freeable, so the guard skips it; a person's `/compact` of
    // the same is never held back.
    let after = |trigger| {
        let mut messages = first.messages.clone();
        // New material past the raised aim, yet less than the guard's minimum to free.
        messages.push(ChatMessage::user(format!("Also note:\n{}", big(20))));
        messages.push(ChatMessage::assistant("Done."));
        CompactionRequest {
            conversation: Conversation::from_messages(messages),
            trigger,
            ..unreachable(&[])
        }
    };
    let automatic = compact(team.directory(), after(CompactTrigger::Automatic))
        .await
        .unwrap();
    assert!(automatic.report.skipped, "{:?}", automatic.report);
    // Held back by the memory of the first attempt, which the worker that ran it recorded.
    assert!(
        automatic.report.reason.contains("waiting for new material"),
        "{}",
        automatic.report.reason
    );
    let manual = compact(team.directory(), after(CompactTrigger::Manual))
        .await
        .unwrap();
    assert!(!manual.report.skipped, "{:?}", manual.report);
    team.shutdown().await;
}

#[tokio::test]
async fn a_replacing_compaction_keeps_what_a_person_asked_of_the_one_it_replaces() {
    let (model, _log, mut started, gates) = GateModel::new(&["busy"]);
    let team = team(model, 1).await;
    let first = compact(team.directory(), unreachable(&[])).await.unwrap();
    assert_eq!(next_start(&mut started).await, "coder");
    let after = |trigger| {
        let mut messages = first.messages.clone();
        messages.push(ChatMessage::user(format!("Also note:\n{}", big(20))));
        messages.push(ChatMessage::assistant("Done."));
        CompactionRequest {
            conversation: Conversation::from_messages(messages),
            trigger,
            ..unreachable(&[])
        }
    };
    let busy = tokio::spawn({
        let directory = team.directory().clone();
        async move { compact(&directory, request("busy", 4)).await }
    });
    assert_eq!(next_start(&mut started).await, "busy");
    // A person's `/compact` waits; the automatic trigger's newer snapshot replaces it and runs
    // as the person asked: not held back by the anti-thrash guard (which alone would skip it,
    // as the test above shows).
    let (manual, automatic, ()) = tokio::join!(
        compact(team.directory(), after(CompactTrigger::Manual)),
        compact(team.directory(), after(CompactTrigger::Automatic)),
        async {
            after_the_mailbox(&team).await;
            gates["busy"].add_permits(1);
        },
    );
    assert!(matches!(manual, Err(CompactionError::Superseded { .. })));
    let automatic = automatic.unwrap();
    assert!(!automatic.report.skipped, "{:?}", automatic.report);
    assert!(busy.await.unwrap().is_ok());
    team.shutdown().await;
}

/// A compression model that panics.
struct PanickingModel;

#[async_trait]
impl ChatModel for PanickingModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: "panics".into(),
            context_window: 32_000,
            supports_tools: true,
        }
    }

    async fn chat_stream(&self, _: ChatRequest) -> Result<ChatStream, ModelError> {
        panic!("the compression model broke");
    }
}

#[tokio::test]
async fn a_job_that_panics_frees_its_agent_and_its_worker() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(Arc::new(PanickingModel));
    spawn_compression_agent(&team, config).await.unwrap();
    // The asker is told no answer came, not left waiting; the one worker and the agent are
    // free again, so the next job of the same agent is taken (and fails the same way).
    for _ in 0..2 {
        let answer = team
            .directory()
            .ask_job(
                COMPRESSION_AGENT,
                |reply| CompressorJob::Compact(Box::new(request("coder", 5)), reply),
                TraceContext::new_root(),
                PATIENCE,
            )
            .await;
        let error = answer.unwrap_err().to_string();
        assert!(error.contains("without answering"), "{error}");
    }
    team.shutdown().await;
}

#[tokio::test]
async fn a_job_is_ranked_by_the_askers_count_not_counted_again() {
    let (model, log, mut started, gates) = GateModel::new(&["busy"]);
    let team = team(model, 1).await;
    let busy = tokio::spawn({
        let directory = team.directory().clone();
        async move { compact(&directory, request("busy", 4)).await }
    });
    assert_eq!(next_start(&mut started).await, "busy");
    // `counted` holds less than `long`, yet its asker counted it 10 tokens short of the
    // window: ranked by that count, it has the least room and goes first.
    let counted = CompactionRequest {
        tokens: Some(3_990),
        ..request("counted", 4)
    };
    let (counted, long, ()) = tokio::join!(
        compact(team.directory(), counted),
        compact(team.directory(), request("long", 6)),
        async {
            after_the_mailbox(&team).await;
            gates["busy"].add_permits(1);
        },
    );
    assert!(counted.is_ok() && long.is_ok());
    assert!(busy.await.unwrap().is_ok());
    assert_eq!(starts(&log), ["busy", "counted", "long"]);
    team.shutdown().await;
}

#[test]
fn a_request_without_the_askers_count_still_decodes() {
    let mut wire = serde_json::to_value(request("coder", 1)).unwrap();
    // What an older peer sends: no `tokens`.
    assert!(wire.as_object_mut().unwrap().remove("tokens").is_some());
    let decoded: CompactionRequest = serde_json::from_value(wire).unwrap();
    assert_eq!(decoded.tokens, None);
    assert_eq!(decoded.conversation, request("coder", 1).conversation);
    let counted = CompactionRequest {
        tokens: Some(1_234),
        ..request("coder", 1)
    };
    let round_trip: CompactionRequest =
        serde_json::from_str(&serde_json::to_string(&counted).unwrap()).unwrap();
    assert_eq!(round_trip.tokens, Some(1_234));
}

#[tokio::test]
async fn stopping_ends_the_running_and_the_queued_jobs() {
    let (model, _log, mut started, _gates) = GateModel::new(&["running"]);
    let team = team(model, 1).await;
    let running = tokio::spawn({
        let directory = team.directory().clone();
        async move { compact_or_error(&directory, request("running", 4)).await }
    });
    assert_eq!(next_start(&mut started).await, "running");
    let queued = tokio::spawn({
        let directory = team.directory().clone();
        async move { compact_or_error(&directory, request("queued", 4)).await }
    });
    after_the_mailbox(&team).await;
    // The gate stays shut: only the stop can end the running job.
    team.shutdown().await;
    for (name, asker) in [("running", running), ("queued", queued)] {
        let error = asker.await.unwrap().unwrap_err();
        assert!(error.contains("without answering"), "{name}: {error}");
    }
}

/// A compaction's outcome, with an asker's error (no answer came) as text.
async fn compact_or_error(
    directory: &Directory,
    request: CompactionRequest,
) -> Result<Compaction, String> {
    directory
        .ask_job(
            COMPRESSION_AGENT,
            |reply| CompressorJob::Compact(Box::new(request), reply),
            TraceContext::new_root(),
            PATIENCE,
        )
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}
