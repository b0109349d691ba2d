//! The actor, not the behaviour, publishes a request's start and finish: a custom behaviour that
//! publishes nothing still has them, and a model fault keeps its type on its way to the caller.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::broadcast;
use troupe_protocol::{Event, EventRecord, ModelError, TraceId};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, AskError, BehaviorFactory, Checkpoint,
    Team, TeamConfig,
};

/// Answers `ok`, fails with a rate limit on `limit`, panics on `panic`; publishes nothing.
struct Quiet;

#[async_trait]
impl AgentBehavior for Quiet {
    async fn handle(
        &mut self,
        request: AgentRequest,
        _ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        match request.text.as_str() {
            "limit" => Err(AgentError::Model(ModelError::RateLimited(
                "slow down".into(),
            ))),
            "panic" => panic!("the quiet agent was told to panic"),
            _ => Ok("ok".into()),
        }
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }
}

fn quiet() -> BehaviorFactory {
    Arc::new(|_| Ok(Box::new(Quiet) as Box<dyn AgentBehavior>))
}

/// The events published under `trace`, up to its `RequestFinished` — or up to a restart, which
/// comes after the finish of the request that failed.
async fn request_events(
    events: &mut broadcast::Receiver<EventRecord>,
    trace: TraceId,
) -> Vec<Event> {
    let mut seen = Vec::new();
    loop {
        let record = events.recv().await.unwrap();
        if matches!(record.event, Event::AgentRestarted { .. }) {
            return seen;
        }
        if record.trace_id != Some(trace) {
            continue;
        }
        let done = matches!(record.event, Event::RequestFinished { .. });
        seen.push(record.event);
        if done {
            return seen;
        }
    }
}

#[tokio::test]
async fn a_custom_behaviour_has_request_events_without_publishing_them() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("quiet", quiet()).await.unwrap();
    let mut events = team.subscribe();

    let request = AgentRequest::from_user("hello");
    let trace = request.trace.id();
    let answer = team
        .ask_with("quiet", request, Duration::from_secs(5))
        .await;
    assert_eq!(answer.unwrap(), "ok");
    assert_eq!(
        request_events(&mut events, trace).await,
        [
            Event::RequestStarted {
                agent: "quiet".into()
            },
            Event::RequestFinished {
                agent: "quiet".into(),
                error: None
            },
        ]
    );

    let request = AgentRequest::from_user("limit");
    let trace = request.trace.id();
    let err = team
        .ask_with("quiet", request, Duration::from_secs(5))
        .await
        .unwrap_err();
    let seen = request_events(&mut events, trace).await;
    assert_eq!(
        seen.last(),
        Some(&Event::RequestFinished {
            agent: "quiet".into(),
            error: Some(err_text(&err)),
        })
    );
    team.shutdown().await;
}

fn err_text(err: &AskError) -> String {
    match err {
        AskError::Agent { error, .. } => error.to_string(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_request_whose_behaviour_panics_is_still_seen_to_finish() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("quiet", quiet()).await.unwrap();
    let mut events = team.subscribe();

    let request = AgentRequest::from_user("panic");
    let trace = request.trace.id();
    team.ask_with("quiet", request, Duration::from_secs(5))
        .await
        .unwrap_err();
    let seen = request_events(&mut events, trace).await;
    assert!(
        matches!(&seen[..], [Event::RequestStarted { .. }, Event::RequestFinished { error: Some(e), .. }] if e.contains("panicked")),
        "{seen:?}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_model_fault_reaches_the_caller_as_a_matchable_model_error() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("quiet", quiet()).await.unwrap();
    let err = team.ask("quiet", "limit").await.unwrap_err();
    let AskError::Agent {
        error: AgentError::Model(ModelError::RateLimited(why)),
        ..
    } = &err
    else {
        panic!("not a rate limit: {err:?}")
    };
    assert_eq!(why, "slow down");
    // The text is what it was when the error was a string.
    assert_eq!(
        err_text(&err),
        "model error: rate limited: slow down",
        "{err}"
    );
    team.shutdown().await;
}
