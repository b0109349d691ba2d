//! Durable steps across a supervisor restart (#46): an agent that failed fatally mid-request
//! (a panic) and was rebuilt from its checkpoint resumes the request in flight once from its
//! last committed step — no logged model answer asked again, no finished tool run again — and
//! a request that fails again in its resume is rolled back, never resumed a second time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use troupe_agents::{LlmAgent, spawn_agent};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{ChatModel, ChatRequest, ChatStream, Event, ModelError, ModelInfo, Role};
use troupe_session::{SessionRecord, StepKind, load, steps};

use super::durable_steps::{Runs, records, spec, team};

/// A scripted model that panics (its agent's actor dies and the supervisor rebuilds it) on the
/// calls `panics_on` picks, given the call's number (1-based, every call counted) and request;
/// the other calls are answered from the script.
struct Panicky {
    script: Arc<ScriptedModel>,
    calls: AtomicUsize,
    panics: AtomicUsize,
    panics_on: fn(usize, &ChatRequest) -> bool,
}

impl Panicky {
    fn new(script: Arc<ScriptedModel>, panics_on: fn(usize, &ChatRequest) -> bool) -> Self {
        Panicky {
            script,
            calls: AtomicUsize::new(0),
            panics: AtomicUsize::new(0),
            panics_on,
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for Panicky {
    fn info(&self) -> ModelInfo {
        self.script.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if (self.panics_on)(call, &request) {
            self.panics.fetch_add(1, Ordering::SeqCst);
            panic!("the model blew up at call {call}");
        }
        self.script.chat_stream(request).await
    }
}

/// Two tool calls, then the final answer.
fn script() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("run", r#"{"command": "a"}"#),
            ScriptedReply::call("run", r#"{"command": "b"}"#),
            ScriptedReply::text("done"),
        ],
    ))
}

fn resumings(log: &std::path::Path) -> usize {
    records(log)
        .iter()
        .filter(|r| matches!(r, SessionRecord::RequestResuming))
        .count()
}

/// The model panics once, at the request's third call (after both tools ran): the rebuilt
/// agent resumes the request from its last step. Only the third answer is asked for, neither
/// tool runs again, and the answer is in the log and on the bus for the gone caller.
#[tokio::test]
async fn a_request_that_failed_fatally_resumes_once_from_its_last_step_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let scripted = script();
    let model = Arc::new(Panicky::new(scripted.clone(), |call, _| call == 3));
    let team = team().await;
    let mut events = team.subscribe();
    let mut agent = spec(scripted.clone(), &runs, &log);
    agent.model = model.clone();
    spawn_agent(&team, agent).await.unwrap();

    let failed = team.ask("coder", "run a then b").await.unwrap_err();
    assert!(failed.to_string().contains("restarted"), "{failed}");
    let resumed = team
        .agent::<LlmAgent>("coder")
        .resume_request()
        .await
        .unwrap();
    assert_eq!(resumed.unwrap().unwrap(), "done");
    let conversation = team.checkpoint("coder").unwrap().conversation;
    team.shutdown().await;

    assert_eq!(model.panics.load(Ordering::SeqCst), 1);
    assert_eq!(
        scripted.requests().len(),
        3,
        "a logged model answer was asked for again"
    );
    assert_eq!(model.calls.load(Ordering::SeqCst), 4);
    assert_eq!(
        *runs.lock().unwrap(),
        ["a", "b"],
        "a finished tool ran again"
    );
    let mut told = None;
    while let Ok(record) = events.try_recv() {
        if let Event::RequestResumed { answer, .. } = record.event {
            told = answer;
        }
    }
    assert_eq!(told.as_deref(), Some("done"), "no RequestResumed");
    let logged = load(&log).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert!(!logged.in_flight);
    assert_eq!(logged.conversation, conversation);
    let last = logged.conversation.messages().last().unwrap();
    assert_eq!(
        (last.role, last.text()),
        (Role::Assistant, "done".to_string())
    );
    assert_eq!(resumings(&log), 1);
    assert!(
        steps(&log)
            .unwrap()
            .iter()
            .any(|s| s.kind == StepKind::Resumed)
    );
}

/// The model panics on every call at the request's third step: the request is resumed once
/// (the attempt is in the log), fails again, and is then rolled back as its checkpoint says —
/// never resumed a second time. The agent answers its next request, and the log loads.
#[tokio::test]
async fn a_request_that_fails_again_in_its_resume_is_rolled_back_never_resumed_twice() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let scripted = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("run", r#"{"command": "a"}"#),
            ScriptedReply::call("run", r#"{"command": "b"}"#),
            ScriptedReply::text("fine"),
        ],
    ));
    // The third step: both tools answered.
    let model = Arc::new(Panicky::new(scripted.clone(), |_, request| {
        request
            .messages
            .iter()
            .any(|m| m.role == Role::Tool && m.text() == "ran b")
    }));
    let team = team().await;
    let mut agent = spec(scripted.clone(), &runs, &log);
    agent.model = model.clone();
    spawn_agent(&team, agent).await.unwrap();

    assert!(team.ask("coder", "run a then b").await.is_err());
    // The one resume fails as the request did: its agent is rebuilt again.
    assert!(
        !matches!(
            team.agent::<LlmAgent>("coder").resume_request().await,
            Ok(Some(Ok(_)))
        ),
        "the resume of a request failing at the same step answered"
    );
    // Rolled back now: nothing is left to resume.
    assert!(
        team.agent::<LlmAgent>("coder")
            .resume_request()
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(team.ask("coder", "next").await.unwrap(), "fine");
    let conversation = team.checkpoint("coder").unwrap().conversation;
    team.shutdown().await;

    assert_eq!(model.panics.load(Ordering::SeqCst), 2, "one resume attempt");
    assert_eq!(
        *runs.lock().unwrap(),
        ["a", "b"],
        "a finished tool ran again"
    );
    assert_eq!(resumings(&log), 1);
    let logged = load(&log).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert!(!logged.in_flight);
    assert_eq!(logged.conversation, conversation);
    let texts: Vec<String> = logged
        .conversation
        .messages()
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["next", "fine"]);
    assert!(
        steps(&log)
            .unwrap()
            .iter()
            .any(|s| s.kind == StepKind::RolledBack)
    );
}

/// An agent that commits per request only keeps no steps to resume from: after the restart
/// nothing is resumed, and the failed request left the log as it found it.
#[tokio::test]
async fn request_level_commits_resume_nothing_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let scripted = script();
    let model = Arc::new(Panicky::new(scripted.clone(), |call, _| call == 3));
    let team = team().await;
    let mut agent = spec(scripted.clone(), &runs, &log).request_commits_only();
    agent.model = model.clone();
    spawn_agent(&team, agent).await.unwrap();

    assert!(team.ask("coder", "run a then b").await.is_err());
    let resumed = team
        .agent::<LlmAgent>("coder")
        .resume_request()
        .await
        .unwrap();
    team.shutdown().await;
    assert!(resumed.is_none());
    assert_eq!(model.calls.load(Ordering::SeqCst), 3);
    assert_eq!(resumings(&log), 0);
    let logged = load(&log).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert!(logged.conversation.is_empty());
}
