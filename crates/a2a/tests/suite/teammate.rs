//! A remote A2A agent as a teammate: asked by name, streamed, its context kept, its questions
//! surfaced, its trace carried — here against a second troupe team served over A2A, and a fake
//! peer for input-required.

use futures::StreamExt as _;
use troupe_a2a::{A2aRemote, A2aServeConfig, INPUT_REQUIRED_PREFIX, ServedAgent, join_team, serve};
use troupe_protocol::Event;
use troupe_runtime::AskItem;

use super::support::{PeerScript, auth, empty_team, fake_peer, remote, rpc, team_answering};

#[tokio::test]
async fn a_served_troupe_agent_is_asked_by_another_team_by_name_with_its_context_kept() {
    let served_team = team_answering("the borrow checker is right").await;
    let coder = ServedAgent::from_team(&served_team, "coder").await.unwrap();
    assert!(
        coder.description.contains("Rust code"),
        "{}",
        coder.description
    );
    let server = serve(
        &served_team,
        A2aServeConfig::new("127.0.0.1:0".parse().unwrap(), vec![coder], auth()),
    )
    .await
    .unwrap();
    let team = empty_team().await;
    let card = join_team(&team, "reviewer", &remote(server.agent_url("coder")))
        .await
        .unwrap();
    assert_eq!(card.name, "coder");
    assert_eq!(card.capabilities.streaming, Some(true));

    // Streamed: the remote agent's text arrives as the asker's deltas, under its troupe name.
    let mut stream = team.ask_stream("reviewer", "is this sound?");
    let mut deltas = String::new();
    let mut answer = None;
    while let Some(item) = stream.next().await {
        match item.unwrap() {
            AskItem::Event(Event::ModelDelta { agent, text }) => {
                assert_eq!(agent, "reviewer");
                deltas.push_str(&text);
            }
            AskItem::Answer(text) => answer = Some(text),
            _ => {}
        }
    }
    assert_eq!(answer.as_deref(), Some("the borrow checker is right"));
    assert_eq!(deltas, "the borrow checker is right");

    // A second ask continues the same A2A context: the served side lists both tasks under it.
    assert_eq!(
        team.ask("reviewer", "and now?").await.unwrap(),
        "the borrow checker is right"
    );
    let (_, listed) = rpc(
        &server.agent_url("coder"),
        "ListTasks",
        serde_json::json!({}),
        &[],
    )
    .await;
    let tasks = listed["result"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{listed}");
    assert_eq!(tasks[0]["contextId"], tasks[1]["contextId"], "{listed}");
    assert_eq!(tasks[0]["status"]["state"], "TASK_STATE_COMPLETED");
    team.shutdown().await;
    server.shutdown().await;
    served_team.shutdown().await;
}

#[tokio::test]
async fn input_required_is_a_question_to_the_asker_whose_next_request_answers_the_same_task() {
    let (base, log) = fake_peer(PeerScript::InputRequired, true).await;
    let team = empty_team().await;
    join_team(&team, "weather", &A2aRemote::new(base))
        .await
        .unwrap();
    let question = team.ask("weather", "what is the weather?").await.unwrap();
    assert_eq!(question, format!("{INPUT_REQUIRED_PREFIX}Which city?"));
    let answer = team.ask("weather", "Paris").await.unwrap();
    assert_eq!(answer, "sunny in Paris");
    let log = std::mem::take(&mut *log.lock().unwrap());
    assert_eq!(log.params[1]["message"]["taskId"], "t1");
    assert_eq!(log.params[1]["message"]["contextId"], "ctx");
    // The remote call is a span of the request that made it: W3C traceparent on every call.
    assert!(
        log.traceparents
            .iter()
            .all(|t| t.as_deref().is_some_and(|t| t.starts_with("00-"))),
        "{:?}",
        log.traceparents
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_replaced_artifact_is_the_answer_and_only_appended_text_streams() {
    let (base, _) = fake_peer(PeerScript::Replacing, true).await;
    let team = empty_team().await;
    join_team(&team, "drafter", &A2aRemote::new(base))
        .await
        .unwrap();
    let mut stream = team.ask_stream("drafter", "write");
    let mut deltas = String::new();
    let mut answer = None;
    while let Some(item) = stream.next().await {
        match item.unwrap() {
            AskItem::Event(Event::ModelDelta { text, .. }) => deltas.push_str(&text),
            AskItem::Answer(text) => answer = Some(text),
            _ => {}
        }
    }
    assert_eq!(deltas, "draft more");
    assert_eq!(answer.as_deref(), Some("final answer"));
    team.shutdown().await;
}

#[tokio::test]
async fn a_served_agents_approval_reaches_a_troupe_asker_as_a_question_and_a_no_refuses_the_call() {
    let runs = super::support::Runs::default();
    let served_team = super::support::team_asking_approval(&runs).await;
    let server = serve(
        &served_team,
        A2aServeConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            vec![ServedAgent::new("ops", "runs commands")],
            auth(),
        ),
    )
    .await
    .unwrap();
    let team = empty_team().await;
    join_team(&team, "ops", &remote(server.agent_url("ops")))
        .await
        .unwrap();
    let question = team.ask("ops", "clean up").await.unwrap();
    assert!(question.starts_with(INPUT_REQUIRED_PREFIX), "{question}");
    assert!(question.contains("rm -rf build"), "{question}");
    assert_eq!(
        team.ask("ops", "no, keep the build").await.unwrap(),
        "removed"
    );
    assert!(runs.lock().unwrap().is_empty(), "a refused call ran");
    team.shutdown().await;
    server.shutdown().await;
    served_team.shutdown().await;
}

#[tokio::test]
async fn an_answer_that_never_reached_a_waiting_task_is_sent_to_it_again() {
    let (base, log) = fake_peer(PeerScript::InputRequiredFlaky, true).await;
    let team = empty_team().await;
    join_team(&team, "weather", &A2aRemote::new(base))
        .await
        .unwrap();
    let question = team.ask("weather", "what is the weather?").await.unwrap();
    assert_eq!(question, format!("{INPUT_REQUIRED_PREFIX}Which city?"));
    let err = team.ask("weather", "Paris").await.unwrap_err();
    assert!(err.to_string().contains("HTTP 503"), "{err}");
    assert_eq!(
        team.ask("weather", "Paris").await.unwrap(),
        "sunny in Paris"
    );
    let log = std::mem::take(&mut *log.lock().unwrap());
    assert_eq!(log.params[1]["message"]["taskId"], "t1");
    assert_eq!(log.params[2]["message"]["taskId"], "t1");
    team.shutdown().await;
}
