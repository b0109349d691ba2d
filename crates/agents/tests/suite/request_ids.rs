//! Request ids (#55): a request asked again under its id — a retry to the agent's new home after
//! its first one died — is answered from the session log, never run twice: whether the agent
//! handled it whole, a new process opened the log after it, or the log shows it in flight (the
//! retry gets the resumed request's answer, each model call made once and each tool run once).

use std::sync::Arc;

use troupe_agents::spawn_agent;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_runtime::AgentRequest;
use troupe_session::{Session, SessionRecord, StepKind, load, steps};

use super::durable_steps::{Runs, records, spec, team as start_team};

fn asked(id: &str, text: &str) -> AgentRequest {
    AgentRequest {
        request_id: Some(id.to_string()),
        ..AgentRequest::from_user(text)
    }
}

fn script() -> Vec<ScriptedReply> {
    vec![
        ScriptedReply::call("run", r#"{"command": "a"}"#),
        ScriptedReply::call("run", r#"{"command": "b"}"#),
        ScriptedReply::text("done"),
    ]
}

const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

#[tokio::test]
async fn a_request_asked_again_under_its_id_is_answered_from_the_log_not_run_twice() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let mut replies = script();
    replies.push(ScriptedReply::text("second"));
    let model = Arc::new(ScriptedModel::new("m", replies));
    let team = start_team().await;
    spawn_agent(&team, spec(model.clone(), &runs, &log))
        .await
        .unwrap();
    let ask = |id: &'static str, text: &'static str| {
        let team = &team;
        async move { team.ask_with("coder", asked(id, text), TIMEOUT).await }
    };
    assert_eq!(ask("r-1", "go").await.unwrap(), "done");
    assert_eq!(ask("r-1", "go").await.unwrap(), "done");
    assert_eq!(model.requests().len(), 3);
    assert_eq!(*runs.lock().unwrap(), ["a", "b"]);
    // Another id is another request.
    assert_eq!(ask("r-2", "again").await.unwrap(), "second");
    assert_eq!(model.requests().len(), 4);
    team.shutdown().await;
    let opened: Vec<Option<String>> = records(&log)
        .into_iter()
        .filter_map(|r| match r {
            SessionRecord::RequestOpened { request_id, .. } => Some(request_id),
            _ => None,
        })
        .collect();
    assert_eq!(opened, [Some("r-1".into()), Some("r-2".into())]);

    // A new process on the log: what the log handled is answered from it, no model call made.
    let idle = Arc::new(ScriptedModel::new("m", Vec::new()));
    let team = start_team().await;
    spawn_agent(&team, spec(idle.clone(), &runs, &log))
        .await
        .unwrap();
    let again = team.ask_with("coder", asked("r-1", "go"), TIMEOUT).await;
    assert_eq!(again.unwrap(), "done");
    let again = team.ask_with("coder", asked("r-2", "again"), TIMEOUT).await;
    assert_eq!(again.unwrap(), "second");
    assert!(idle.requests().is_empty());
    assert_eq!(runs.lock().unwrap().len(), 2);
    team.shutdown().await;
}

#[tokio::test]
async fn a_retry_of_the_request_in_flight_gets_its_resumed_answer_with_no_step_done_twice() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new("m", script()));
    let team = start_team().await;
    spawn_agent(&team, spec(model, &runs, &log)).await.unwrap();
    let first = team.ask_with("coder", asked("r-1", "go"), TIMEOUT).await;
    assert_eq!(first.unwrap(), "done");
    team.shutdown().await;
    // The process killed once the first tool's result was committed.
    let cut_at = steps(&log)
        .unwrap()
        .into_iter()
        .find(|s| s.kind == StepKind::ToolCall)
        .unwrap()
        .id;
    let cut = dir.path().join("cut.jsonl");
    Session::fork(&log, cut_at, &cut).unwrap();
    assert_eq!(
        load(&cut).unwrap().in_flight_request.as_deref(),
        Some("r-1")
    );

    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new("m", script().into_iter().skip(1)));
    let team = start_team().await;
    spawn_agent(&team, spec(model.clone(), &runs, &cut))
        .await
        .unwrap();
    let retried = team.ask_with("coder", asked("r-1", "go"), TIMEOUT).await;
    assert_eq!(retried.unwrap(), "done");
    // The two model calls the log lacked, the one tool whose result it lacked.
    assert_eq!(model.requests().len(), 2);
    assert_eq!(*runs.lock().unwrap(), ["b"]);
    team.shutdown().await;
    let session = load(&cut).unwrap();
    assert!(!session.in_flight);
    assert_eq!(
        session.handled.get("r-1"),
        Some(&troupe_session::HandledRequest::Answered("done".into()))
    );
    // The user message once: the retry added nothing to the conversation.
    let users = session
        .conversation
        .messages()
        .iter()
        .filter(|m| m.text() == "go")
        .count();
    assert_eq!(users, 1);
}
