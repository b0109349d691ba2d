//! The budget is checked before every model call, a request's first included, with room kept
//! for the answer (the output reserve): a large user message or a large relayed answer is
//! compacted before the model sees it, and a message that cannot fit even alone is refused
//! before the call with the conversation and the session log as they were.

use std::sync::Arc;

use troupe_agents::compression::CompressionConfig;
use troupe_agents::compression::CompressorModel;
use troupe_agents::{
    AgentSpec, CompactionSettings, WorkAhead, shared_counter, spawn_agent, spawn_compression_agent,
};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{ChatMessage, ChatRequest, Event, MessageKind, Role};
use troupe_runtime::{AgentError, AskError, ContextOverflow, Team, TeamConfig};
use troupe_tokens::TokenCounter;

/// A team whose compression agent uses the mechanical summary (no model of its own).
async fn team() -> Team {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::None;
    spawn_compression_agent(&team, config).await.unwrap();
    team
}

/// A user message text of about `tokens` tokens (at least that many).
fn text_of(counter: &dyn TokenCounter, label: &str, tokens: usize) -> String {
    let mut text = format!("{label}: the notes follow.\n");
    let mut i = 0;
    while counter.count_messages(&[ChatMessage::user(text.clone())]) < tokens {
        text.push_str(&format!(
            "line {i}: the parser in src/parse_{i}.rs keeps its header table\n"
        ));
        i += 1;
    }
    text
}

/// [`text_of`] for texts of many windows: sized from a sample's count, then counted once (its
/// line-by-line count is quadratic).
fn long_text(counter: &dyn TokenCounter, label: &str, tokens: usize) -> String {
    let line =
        |i: usize| format!("line {i}: the parser in src/parse_{i}.rs keeps its header table\n");
    let sample: String = (0..100).map(line).collect();
    let per_line = counter.count(&sample).div_ceil(100);
    let mut text = format!("{label}: the notes follow.\n");
    text.extend((0..tokens.div_ceil(per_line)).map(line));
    assert!(counter.count_messages(&[ChatMessage::user(text.clone())]) >= tokens);
    text
}

/// What a request costs in the window: its messages (with the reply priming) and its tools.
fn request_tokens(counter: &dyn TokenCounter, request: &ChatRequest) -> usize {
    let tools = if request.tools.is_empty() {
        0
    } else {
        counter.count(&serde_json::to_string(&request.tools).unwrap())
    };
    let messages: Vec<ChatMessage> = request
        .messages
        .iter()
        .map(|m| ChatMessage::clone(m))
        .collect();
    counter.count_messages(&messages) + tools
}

#[test]
fn the_output_reserve_is_the_setting_else_max_tokens_else_4096_and_at_most_a_quarter() {
    let settings = CompactionSettings::default();
    assert_eq!(settings.output_reserve_for(None, 128_000), 4_096);
    assert_eq!(settings.output_reserve_for(Some(1_000), 128_000), 1_000);
    assert_eq!(settings.output_reserve_for(None, 8_000), 2_000);
    let set = CompactionSettings {
        output_reserve: Some(500),
        ..CompactionSettings::default()
    };
    assert_eq!(set.output_reserve_for(Some(1_000), 128_000), 500);
    let greedy = CompactionSettings {
        output_reserve: Some(100_000),
        ..CompactionSettings::default()
    };
    assert_eq!(greedy.output_reserve_for(None, 32_000), 8_000);
}

#[tokio::test]
async fn a_big_user_message_is_compacted_before_the_first_model_call() {
    const WINDOW: usize = 16_000;
    let counter = shared_counter();
    let team = team().await;
    let model = Arc::new(
        ScriptedModel::new("m", [])
            .with_fallback("Noted.")
            .with_context_window(WINDOW),
    );
    // The blocking timeline: no compaction runs ahead of the trigger.
    let settings = CompactionSettings {
        work_ahead: WorkAhead::Off,
        ..CompactionSettings::default()
    };
    spawn_agent(
        &team,
        AgentSpec::new("coder", model.clone())
            .instructions("You are a careful engineer.")
            .compaction(settings),
    )
    .await
    .unwrap();
    // Six exchanges of ~1.2k tokens: ~7.5k tokens, plus the 4k reserve under the trigger
    // (12.8k), so no compaction has run yet.
    for turn in 0..6 {
        let text = text_of(counter.as_ref(), &format!("step {turn}"), 1_200);
        team.ask("coder", &text).await.unwrap();
    }
    let mut events = team.subscribe();
    let calls_before = model.requests().len();
    // 6k more: the request would be ~13.5k, and with the reserve over the window.
    let big = text_of(counter.as_ref(), "the big paste", 6_000);
    team.ask("coder", &big).await.unwrap();

    let requests = model.requests();
    assert_eq!(requests.len(), calls_before + 1, "one model call");
    let last = requests.last().unwrap();
    let reserve = CompactionSettings::default().output_reserve_for(None, WINDOW);
    assert_eq!(reserve, 4_000);
    for request in &requests {
        let tokens = request_tokens(counter.as_ref(), request);
        assert!(
            tokens + reserve <= WINDOW,
            "{tokens} + {reserve} > {WINDOW}"
        );
    }
    assert!(
        last.messages
            .iter()
            .any(|m| m.kind == MessageKind::Summary || m.kind == MessageKind::CompressedStub),
        "compacted before the call"
    );
    assert_eq!(
        last.messages.last().unwrap().text(),
        big,
        "the message itself is whole"
    );
    // The compaction came before the model call.
    let mut order = Vec::new();
    while let Ok(record) = events.try_recv() {
        match record.event {
            Event::CompactionFinished { report, .. } if !report.skipped => order.push("compaction"),
            Event::ModelCallStarted { .. } => order.push("model"),
            _ => {}
        }
    }
    assert_eq!(order.first(), Some(&"compaction"), "{order:?}");
    assert!(order.contains(&"model"), "{order:?}");
    team.shutdown().await;
}

#[tokio::test]
async fn a_big_answer_relayed_by_ask_agent_is_compacted_before_the_coordinator_sees_it() {
    const WINDOW: usize = 8_000;
    let counter = shared_counter();
    let team = team().await;
    let coordinator = Arc::new(
        ScriptedModel::new(
            "coord",
            [
                ScriptedReply::call(
                    "ask_agent",
                    r#"{"agent": "worker", "message": "paste the whole report"}"#,
                ),
                ScriptedReply::text("The worker sent its report."),
            ],
        )
        .with_context_window(WINDOW),
    );
    // ~5.9k tokens: with the rest of the request under the trigger (6.4k) but over the window
    // once the 2k reserve is counted.
    let answer = text_of(counter.as_ref(), "report", 5_900);
    let worker = Arc::new(ScriptedModel::new("work", [ScriptedReply::text(answer)]));
    spawn_agent(
        &team,
        AgentSpec::new("coordinator", coordinator.clone()).team_messaging(true),
    )
    .await
    .unwrap();
    spawn_agent(&team, AgentSpec::new("worker", worker))
        .await
        .unwrap();
    assert_eq!(
        team.ask("coordinator", "ask the worker").await.unwrap(),
        "The worker sent its report."
    );
    let requests = coordinator.requests();
    assert_eq!(requests.len(), 2);
    let reserve = CompactionSettings::default().output_reserve_for(None, WINDOW);
    for request in &requests {
        let tokens = request_tokens(counter.as_ref(), request);
        assert!(
            tokens + reserve <= WINDOW,
            "{tokens} + {reserve} > {WINDOW}"
        );
    }
    // The relayed answer reached the model shortened by compaction, not whole.
    let relayed = requests[1]
        .messages
        .iter()
        .find(|m| m.role == troupe_protocol::Role::Tool)
        .unwrap();
    assert!(
        counter.count_message(relayed) < 5_000,
        "the answer was compacted"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_message_larger_than_the_window_is_refused_before_the_call_and_changes_nothing() {
    const WINDOW: usize = 8_000;
    let counter = shared_counter();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let team = team().await;
    let model = Arc::new(
        ScriptedModel::new("m", [])
            .with_fallback("Noted.")
            .with_context_window(WINDOW),
    );
    spawn_agent(
        &team,
        AgentSpec::new("coder", model.clone())
            .instructions("You are a careful engineer.")
            .session(&log),
    )
    .await
    .unwrap();
    team.ask("coder", "hello").await.unwrap();
    let conversation = team.checkpoint("coder").unwrap().conversation;
    let logged = std::fs::read(&log).unwrap();
    let calls = model.requests().len();
    let mut events = team.subscribe();

    let giant = text_of(counter.as_ref(), "a whole log", 9_000);
    let err = team.ask("coder", &giant).await.unwrap_err();
    let AskError::Agent {
        error: AgentError::ContextOverflow(overflow),
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(
        matches!(
            overflow,
            ContextOverflow::MessageTooLarge {
                role: Role::User,
                position: 4,
                of: 4,
                window: 8000,
                ..
            }
        ),
        "{overflow:?}"
    );
    let message = &overflow.to_string();
    // It names the message (role, id, position) and its size.
    let tokens = counter.count_message(&ChatMessage::user(giant.clone()));
    assert!(message.contains("the user message m"), "{message}");
    assert!(message.contains("(message 4 of 4)"), "{message}");
    assert!(
        message.contains(&format!("takes {tokens} tokens")),
        "{message}"
    );
    assert!(
        message.contains("context window of 8000 tokens"),
        "{message}"
    );

    assert_eq!(model.requests().len(), calls, "the model was never called");
    assert_eq!(team.checkpoint("coder").unwrap().conversation, conversation);
    assert_eq!(
        std::fs::read(&log).unwrap(),
        logged,
        "the session log is unchanged"
    );
    while let Ok(record) = events.try_recv() {
        assert!(
            !matches!(
                record.event,
                Event::CompactionFinished { .. } | Event::ModelCallStarted { .. }
            ),
            "{:?}",
            record.event
        );
    }
    // The agent goes on: a message that fits is answered.
    assert_eq!(team.ask("coder", "a short one").await.unwrap(), "Noted.");
    team.shutdown().await;
}

#[tokio::test]
async fn an_answer_larger_than_the_window_is_cut_as_it_arrives_and_stays_recallable() {
    const WINDOW: usize = 16_000;
    let counter = shared_counter();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let team = team().await;
    // The answer alone is three windows: no compaction could fit it, and it is protected.
    let huge = long_text(counter.as_ref(), "the whole report", 3 * WINDOW);
    let middle = huge
        .lines()
        .nth(huge.lines().count() / 2)
        .unwrap()
        .to_string();
    let model = Arc::new(
        ScriptedModel::new(
            "m",
            [
                ScriptedReply::text(huge.clone()),
                ScriptedReply::text("Second answer."),
            ],
        )
        .with_context_window(WINDOW),
    );
    spawn_agent(
        &team,
        AgentSpec::new("coder", model.clone())
            .instructions("You are a careful engineer.")
            .session(&log),
    )
    .await
    .unwrap();
    // The caller gets the whole answer.
    assert_eq!(team.ask("coder", "write the report").await.unwrap(), huge);

    // The conversation keeps its head and tail, says where the rest went, and goes on.
    assert_eq!(
        team.ask("coder", "now the summary").await.unwrap(),
        "Second answer."
    );
    let sent = model.requests().last().unwrap().clone();
    assert!(request_tokens(counter.as_ref(), &sent) < WINDOW);
    let cut = sent
        .messages
        .iter()
        .find(|m| m.role == Role::Assistant)
        .unwrap()
        .text();
    assert!(
        cut.starts_with("the whole report: the notes follow."),
        "{cut}"
    );
    assert!(cut.contains("bytes dropped"), "{cut}");
    assert!(!cut.contains(&middle), "the middle was cut");
    let archive = team
        .with_agent::<troupe_agents::LlmAgent, _, _>("coder", |a| a.archive().clone())
        .await
        .unwrap()
        .unwrap();
    let [entry] = archive.entries() else {
        panic!("{:?}", archive.entries())
    };
    assert_eq!(entry.original.message.text(), huge);
    let id = entry.original.id;
    assert!(cut.contains(&format!("[replaces {id}]")), "{cut}");

    // The model recalls it by the id the cut names, a page at a time.
    model.push([
        ScriptedReply::call("recall", format!(r#"{{"id": "{id}", "page": 2}}"#)),
        ScriptedReply::text("Recalled."),
    ]);
    assert_eq!(
        team.ask("coder", "what was in the middle?").await.unwrap(),
        "Recalled."
    );
    let recalled = model
        .requests()
        .last()
        .unwrap()
        .messages
        .last()
        .unwrap()
        .text();
    assert!(recalled.contains("line "), "{recalled}");
    assert!(!recalled.contains("bytes dropped"), "{recalled}");
    // The session log resumes with the cut and its archive.
    let logged = troupe_session::load(&log).unwrap();
    assert_eq!(logged.archive_entries.len(), 1);
    team.shutdown().await;
}
