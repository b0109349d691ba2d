//! Budgets that pause (#33): once a budget is spent, an agent whose policy says pause publishes
//! `BudgetPaused` before its next model call and waits; a raised limit lets the request go on
//! to its answer, a pause that times out (or is abandoned) ends it typed, losing nothing.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use troupe_agents::spend::{AgentBudget, OnExceeded};
use troupe_agents::{AgentSpec, spawn_agent};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{BudgetExceeded, BudgetScope, SpendLimit};
use troupe_protocol::{Event, Role};
use troupe_runtime::budget::TeamSpend;
use troupe_runtime::{AgentError, AgentRequest, AskError, AskItem, Team};
use troupe_session::load;
use troupe_tools::ToolRegistry;

use super::support::compression::team;

fn limit_input(n: u64) -> SpendLimit {
    SpendLimit {
        input_tokens: Some(n),
        ..SpendLimit::default()
    }
}

/// A model that reads a file, then answers: the first call spends a one-token budget.
fn reader() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("read_file", r#"{"path": "a.txt"}"#),
            ScriptedReply::text("it says alpha"),
        ],
    ))
}

/// An agent named `coder` reading `a.txt` in a fresh workspace, logging to `coder.jsonl`.
async fn spawn_reader(
    team: &Team,
    dir: &tempfile::TempDir,
    model: Arc<ScriptedModel>,
    budget: AgentBudget,
) {
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let spec = AgentSpec::new("coder", model)
        .tools(ToolRegistry::with_file_tools())
        .workspace_root(dir.path())
        .session(dir.path().join("coder.jsonl"))
        .budget(budget);
    spawn_agent(team, spec).await.unwrap();
}

/// The next `BudgetPaused` on the team's bus.
async fn paused(
    events: &mut tokio::sync::broadcast::Receiver<troupe_protocol::EventRecord>,
) -> BudgetExceeded {
    loop {
        let record = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("no BudgetPaused within 10 s")
            .unwrap();
        if let Event::BudgetPaused { agent, exceeded } = record.event {
            assert_eq!(agent, "coder");
            return exceeded;
        }
    }
}

/// Ask `coder` on a task of its own, so the test can raise the limit meanwhile.
fn ask_in_background(team: &Team) -> tokio::task::JoinHandle<Result<String, AskError>> {
    let directory = team.directory().clone();
    tokio::spawn(async move {
        let request = AgentRequest::from_user("what does a.txt say?");
        directory
            .ask("coder", request, Duration::from_secs(60))
            .await
    })
}

fn roles(dir: &tempfile::TempDir) -> Vec<Role> {
    load(&dir.path().join("coder.jsonl"))
        .unwrap()
        .conversation
        .to_messages()
        .iter()
        .map(|m| m.role)
        .collect()
}

#[tokio::test]
async fn a_paused_request_goes_on_to_its_answer_once_the_limit_is_raised() {
    let dir = tempfile::tempdir().unwrap();
    let model = reader();
    let budget = AgentBudget {
        request: limit_input(1),
        on_exceeded: OnExceeded::pause(),
        ..AgentBudget::default()
    };
    let team = team().await;
    spawn_reader(&team, &dir, model.clone(), budget.clone()).await;
    let mut events = team.subscribe();
    let ask = ask_in_background(&team);
    let exceeded = paused(&mut events).await;
    assert_eq!(exceeded.scope, BudgetScope::Request);
    assert_eq!(exceeded.limit, limit_input(1));
    // Paused before the second call: the first one and its tool result are all there is.
    assert_eq!(model.requests().len(), 1);
    assert!(!ask.is_finished());
    // The builder's clone of the budget raises the agent's own.
    budget
        .raise(BudgetScope::Request, limit_input(1_000_000))
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), ask)
        .await
        .expect("the raised request did not finish")
        .unwrap();
    assert_eq!(answer.unwrap(), "it says alpha");
    assert_eq!(model.requests().len(), 2);
    assert_eq!(
        roles(&dir),
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_team_budget_raised_with_set_limit_lets_a_paused_agent_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let model = reader();
    let shared = TeamSpend::new(limit_input(1));
    let budget = AgentBudget {
        team: Some(shared.clone()),
        on_exceeded: OnExceeded::pause(),
        ..AgentBudget::default()
    };
    let team = team().await;
    spawn_reader(&team, &dir, model.clone(), budget).await;
    let mut events = team.subscribe();
    let ask = ask_in_background(&team);
    let exceeded = paused(&mut events).await;
    assert_eq!(exceeded.scope, BudgetScope::Team);
    // A changed limit still spent keeps the agent waiting.
    shared.set_limit(limit_input(2));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!ask.is_finished());
    assert_eq!(model.requests().len(), 1);
    shared.set_limit(limit_input(1_000_000));
    let answer = tokio::time::timeout(Duration::from_secs(10), ask)
        .await
        .expect("the raised request did not finish")
        .unwrap();
    assert_eq!(answer.unwrap(), "it says alpha");
    team.shutdown().await;
}

#[tokio::test]
async fn a_pause_that_times_out_ends_typed_and_keeps_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let model = reader();
    let budget = AgentBudget {
        request: limit_input(1),
        on_exceeded: OnExceeded::Pause {
            timeout: Duration::from_millis(300),
        },
        ..AgentBudget::default()
    };
    let team = team().await;
    spawn_reader(&team, &dir, model.clone(), budget).await;
    let mut events = team.subscribe();
    let outcome = team.ask("coder", "what does a.txt say?").await;
    let hit = match outcome {
        Err(AskError::Agent {
            error: AgentError::BudgetExceeded(hit),
            ..
        }) => hit,
        other => panic!("expected a budget exceeded, got {other:?}"),
    };
    assert_eq!(hit.scope, BudgetScope::Request);
    // It paused first, and said what it paused on.
    assert_eq!(paused(&mut events).await, hit);
    assert_eq!(model.requests().len(), 1);
    assert_eq!(roles(&dir), [Role::User, Role::Assistant, Role::Tool]);
    // The next request (a budget of its own) answers the tool result.
    assert_eq!(team.ask("coder", "go on").await.unwrap(), "it says alpha");
    team.shutdown().await;
}

#[tokio::test]
async fn a_paused_request_abandoned_by_its_caller_ends_typed_and_keeps_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let model = reader();
    let budget = AgentBudget {
        request: limit_input(1),
        on_exceeded: OnExceeded::pause(),
        ..AgentBudget::default()
    };
    let team = team().await;
    spawn_reader(&team, &dir, model.clone(), budget).await;
    let mut events = team.subscribe();
    let mut stream = team.ask_stream("coder", "what does a.txt say?");
    loop {
        match stream.next().await {
            Some(Ok(AskItem::Event(Event::BudgetPaused { .. }))) => break,
            Some(Ok(_)) => {}
            other => panic!("the request ended before it paused: {other:?}"),
        }
    }
    drop(stream);
    // The agent ends the request typed (no rollback, unlike a cancelled one).
    loop {
        let record = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the abandoned request did not finish")
            .unwrap();
        if let Event::RequestFinished { agent, error } = record.event
            && agent == "coder"
        {
            assert!(error.unwrap().contains("budget exceeded"));
            break;
        }
    }
    assert_eq!(roles(&dir), [Role::User, Role::Assistant, Role::Tool]);
    team.shutdown().await;
}

#[tokio::test]
async fn every_budget_still_spent_after_a_raise_pauses_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let model = reader();
    // The first call spends both the request's and the agent's one-token budgets.
    let budget = AgentBudget {
        request: limit_input(1),
        agent: limit_input(1),
        on_exceeded: OnExceeded::pause(),
        ..AgentBudget::default()
    };
    let team = team().await;
    spawn_reader(&team, &dir, model.clone(), budget.clone()).await;
    let mut events = team.subscribe();
    let ask = ask_in_background(&team);
    assert_eq!(paused(&mut events).await.scope, BudgetScope::Request);
    budget
        .raise(BudgetScope::Request, limit_input(1_000_000))
        .unwrap();
    // The agent's budget is still spent: it is asked about in a pause of its own, not waited
    // on in silence.
    let second = paused(&mut events).await;
    assert_eq!(second.scope, BudgetScope::Agent);
    assert_eq!(second.limit, limit_input(1));
    assert_eq!(model.requests().len(), 1);
    assert!(!ask.is_finished());
    budget
        .raise(BudgetScope::Agent, limit_input(1_000_000))
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), ask)
        .await
        .expect("the raised request did not finish")
        .unwrap();
    assert_eq!(answer.unwrap(), "it says alpha");
    assert_eq!(model.requests().len(), 2);
    team.shutdown().await;
}
