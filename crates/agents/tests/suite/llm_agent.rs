//! The LLM agent's turn loop, driven by the scripted model.

use std::sync::Arc;

use troupe_agents::{AgentSpec, LlmAgent, spawn_agent};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{Event, ModelError, Role};
use troupe_runtime::{AgentError, AskError, Team, TeamConfig};

use super::support::tools::shout_tools;

#[tokio::test]
async fn a_two_tool_call_turn_lands_results_in_order() {
    let model = Arc::new(ScriptedModel::new(
        "script",
        [
            ScriptedReply::ToolCalls(vec![
                ("shout".into(), r#"{"word": "first"}"#.into()),
                ("shout".into(), r#"{"word": "second"}"#.into()),
            ]),
            ScriptedReply::text("FIRST then SECOND"),
        ],
    ));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let spec = AgentSpec::new("caller", model.clone())
        .instructions("Use tools.")
        .tools(shout_tools());
    spawn_agent(&team, spec).await.unwrap();

    assert_eq!(
        team.ask("caller", "shout two words").await.unwrap(),
        "FIRST then SECOND"
    );

    let conversation = team.checkpoint("caller").unwrap().conversation;
    let roles: Vec<Role> = conversation.messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::Assistant
        ]
    );
    let calls = conversation.messages()[2].calls().to_vec();
    assert_eq!(
        conversation.messages()[3].tool_call_id.as_deref(),
        Some(calls[0].id.as_str())
    );
    assert_eq!(conversation.messages()[3].text(), "FIRST");
    assert_eq!(
        conversation.messages()[4].tool_call_id.as_deref(),
        Some(calls[1].id.as_str())
    );
    assert_eq!(conversation.messages()[4].text(), "SECOND");

    // The second model call saw both tool results and the tool definitions.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].messages.len(), 5);
    assert_eq!(requests[0].tools[0].name, "shout");
    team.shutdown().await;
}

#[tokio::test]
async fn events_of_one_request_arrive_in_causal_order() {
    let model = Arc::new(ScriptedModel::new(
        "script",
        [
            ScriptedReply::call("shout", r#"{"word": "a"}"#),
            ScriptedReply::text("A"),
        ],
    ));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut events = team.subscribe();
    spawn_agent(&team, AgentSpec::new("solo", model).tools(shout_tools()))
        .await
        .unwrap();
    team.ask("solo", "go").await.unwrap();

    let mut kinds = Vec::new();
    let mut traces = std::collections::BTreeSet::new();
    let mut last_seq = 0;
    while let Ok(record) = events.try_recv() {
        assert!(record.seq > last_seq, "sequence numbers increase");
        last_seq = record.seq;
        traces.insert(record.trace_id);
        kinds.push(match record.event {
            Event::RequestStarted { .. } => "request_started",
            Event::ModelCallStarted { .. } => "model_started",
            Event::ModelCallFinished { .. } => "model_finished",
            Event::ModelDelta { .. } => "model_delta",
            Event::ToolCallStarted { .. } => "tool_started",
            Event::ToolCallFinished { .. } => "tool_finished",
            Event::RequestFinished { .. } => "request_finished",
            _ => "other",
        });
    }
    // The streamed text arrives between its call's start and finish (one entry per run of deltas).
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "request_started",
            "model_started",
            "model_finished",
            "tool_started",
            "tool_finished",
            "model_started",
            "model_delta",
            "model_finished",
            "request_finished"
        ]
    );
    assert_eq!(traces.len(), 1, "one request is one trace: {traces:?}");
    team.shutdown().await;
}

#[tokio::test]
async fn a_provider_fault_leaves_the_conversation_unchanged() {
    let model = Arc::new(ScriptedModel::new(
        "script",
        [
            ScriptedReply::text("hello"),
            ScriptedReply::Error(ModelError::Server {
                status: 500,
                message: "overloaded".into(),
            }),
        ],
    ));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(&team, AgentSpec::new("a", model))
        .await
        .unwrap();
    team.ask("a", "hi").await.unwrap();
    let before = team.checkpoint("a").unwrap().conversation;
    let err = team.ask("a", "again").await.unwrap_err();
    // The provider's fault reaches the caller typed: matched, not parsed from text.
    let AskError::Agent {
        error:
            AgentError::Model(ModelError::Server {
                status: 500,
                message,
            }),
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(message, "overloaded");
    assert_eq!(team.checkpoint("a").unwrap().conversation, before);
    team.shutdown().await;
}

#[tokio::test]
async fn max_turns_stops_a_model_that_never_answers() {
    let model = Arc::new(ScriptedModel::new(
        "script",
        (0..3).map(|_| ScriptedReply::call("shout", r#"{"word": "again"}"#)),
    ));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(
        &team,
        AgentSpec::new("loop", model)
            .tools(shout_tools())
            .max_turns(3),
    )
    .await
    .unwrap();
    let err = team.ask("loop", "go").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent `loop`: no final answer after 3 model turns"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn agents_delegate_to_each_other_with_ask_agent() {
    let coordinator = Arc::new(ScriptedModel::new(
        "coord",
        [
            ScriptedReply::call(
                "ask_agent",
                r#"{"agent": "worker", "message": "what is 6 x 7?"}"#,
            ),
            ScriptedReply::text("The worker says 42."),
        ],
    ));
    let worker = Arc::new(ScriptedModel::new("work", [ScriptedReply::text("42")]));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(
        &team,
        AgentSpec::new("coordinator", coordinator).team_messaging(true),
    )
    .await
    .unwrap();
    spawn_agent(&team, AgentSpec::new("worker", worker.clone()))
        .await
        .unwrap();
    assert_eq!(
        team.ask("coordinator", "ask the worker").await.unwrap(),
        "The worker says 42."
    );
    let worker_saw = worker.requests()[0].messages.last().unwrap().text();
    assert!(
        worker_saw.contains("from agent `coordinator`") && worker_saw.contains("6 x 7"),
        "{worker_saw}"
    );
    let tool_result = team
        .checkpoint("coordinator")
        .unwrap()
        .conversation
        .messages()[2]
        .text();
    assert_eq!(tool_result, "42");
    team.shutdown().await;
}

#[tokio::test]
async fn tools_can_be_registered_on_a_running_agent() {
    let model = Arc::new(ScriptedModel::new(
        "script",
        [
            ScriptedReply::call("shout", r#"{"word": "late"}"#),
            ScriptedReply::text("done"),
        ],
    ));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(&team, AgentSpec::new("a", model))
        .await
        .unwrap();
    let registered = team
        .with_agent("a", |agent: &mut LlmAgent| {
            agent
                .tools_mut()
                .merge(&shout_tools())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    assert_eq!(registered, Some(Ok(())));
    team.ask("a", "go").await.unwrap();
    let conversation = team.checkpoint("a").unwrap().conversation;
    assert_eq!(conversation.messages()[2].text(), "LATE");
    // A duplicate name is refused and says which.
    let dup = team
        .with_agent("a", |agent: &mut LlmAgent| {
            agent
                .tools_mut()
                .merge(&shout_tools())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    assert!(dup.unwrap().unwrap_err().contains("shout"));
    team.shutdown().await;
}
