//! Asking agents on another node process, as local ones are asked. Agent names differ per test:
//! process groups are process-wide and the tests share this process.

use std::time::{Duration, Instant};

use troupe_protocol::ResponseFormat;
use troupe_runtime::AskError;

use super::support::child::{ChildNode, ChildSpec};
use super::support::{ask_in_background, plain_node};

#[tokio::test]
async fn an_agent_on_another_process_is_asked_by_name_and_can_ask_back() {
    let child = ChildNode::start(&ChildSpec::new("b1", &["worker1"]));
    let (team, node) = plain_node("a1", &["lead1"]).await;
    assert_eq!(node.connect(child.addr).await.unwrap(), "b1");
    assert_eq!(node.peers(), vec!["b1".to_string()]);

    assert_eq!(team.ask("worker1", "hi").await.unwrap(), "hi@b1");
    // The remote agent asks back across the wire: b1 → a1.
    assert_eq!(
        team.ask("worker1", "ask lead1 hello").await.unwrap(),
        "hello@a1"
    );
    // A name nowhere in the cluster is the same error as locally, listing what exists.
    match team.ask("nobody1", "hi").await {
        Err(AskError::NoSuchAgent { name, .. }) => assert_eq!(name, "nobody1"),
        other => panic!("expected NoSuchAgent, got {other:?}"),
    }
    // The trace travels: the remote agent sees the request's trace id.
    let mut stream_trace = None;
    let request = troupe_runtime::AgentRequest::from_user("trace");
    let sent = request.trace.id().to_string();
    if let Ok(answer) = team
        .ask_with("worker1", request, Duration::from_secs(30))
        .await
    {
        stream_trace = Some(answer);
    }
    assert_eq!(stream_trace.as_deref(), Some(sent.as_str()));

    node.shutdown().await;
    team.shutdown().await;
    assert!(child.stop().success());
}

#[tokio::test]
async fn a_typed_asks_response_format_reaches_the_agent_on_another_process() {
    let child = ChildNode::start(&ChildSpec::new("b19", &["worker19"]));
    let (team, node) = plain_node("a19", &[]).await;
    node.connect(child.addr).await.unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"]
    });
    let request = troupe_runtime::AgentRequest {
        response_format: Some(ResponseFormat {
            name: "City".into(),
            schema: schema.clone(),
            strict: false,
        }),
        ..troupe_runtime::AgentRequest::from_user("format")
    };
    let answer = team
        .ask_with("worker19", request, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(answer, format!("City {schema}"));
    // An untyped ask stays untyped there.
    assert_eq!(team.ask("worker19", "format").await.unwrap(), "none");
    node.shutdown().await;
    team.shutdown().await;
    assert!(child.stop().success());
}

#[tokio::test]
async fn a_remote_panic_gives_the_local_error_and_the_agent_is_restarted_there() {
    let child = ChildNode::start(&ChildSpec::new("b2", &["worker2"]));
    let (team, node) = plain_node("a2", &[]).await;
    node.connect(child.addr).await.unwrap();

    match team.ask("worker2", "panic").await {
        Err(AskError::AgentFailed { name, reason }) => {
            assert_eq!(name, "worker2");
            assert!(reason.contains("boom"), "{reason}");
        }
        other => panic!("expected AgentFailed, got {other:?}"),
    }
    assert_eq!(team.ask("worker2", "again").await.unwrap(), "again@b2");
    node.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_node_killed_mid_request_fails_the_ask_with_node_down_not_a_timeout() {
    let mut child = ChildNode::start(&ChildSpec::new("b3", &["worker3"]));
    let (team, node) = plain_node("a3", &[]).await;
    node.connect(child.addr).await.unwrap();
    let asking = ask_in_background(&team, "worker3", "sleep 60000");
    // The request is in the worker's hands once the node has acknowledged it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.kill();
    let killed = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(60), asking)
        .await
        .expect("the ask hung after its node died")
        .unwrap();
    assert_eq!(result, Err(AskError::NodeDown { node: "b3".into() }));
    // Far under the ask's 120 s timeout: the disconnect itself failed the request.
    assert!(
        killed.elapsed() < Duration::from_secs(10),
        "{:?}",
        killed.elapsed()
    );
    // The dead node's agents are gone from the cluster.
    let after = team.ask("worker3", "hi").await;
    assert!(
        matches!(
            after,
            Err(AskError::NoSuchAgent { .. } | AskError::NodeDown { .. })
        ),
        "{after:?}"
    );
    node.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_frozen_node_fails_the_ask_with_node_down_within_seconds() {
    let child = ChildNode::start(&ChildSpec::new("b18", &["worker18"]));
    let (team, node) = plain_node("a18", &[]).await;
    node.connect(child.addr).await.unwrap();
    let asking = ask_in_background(&team, "worker18", "sleep 60000");
    // The request is in the worker's hands once the node has acknowledged it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // SIGSTOP: the connection stays open, nothing answers on it.
    child.signal("STOP");
    let result = tokio::time::timeout(Duration::from_secs(15), asking).await;
    child.signal("CONT");
    let result = result
        .expect("the ask still waited 15 s after its node froze")
        .unwrap();
    assert_eq!(result, Err(AskError::NodeDown { node: "b18".into() }));
    assert!(node.peers().is_empty(), "{:?}", node.peers());
    node.shutdown().await;
    team.shutdown().await;
}
