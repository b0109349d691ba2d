//! An agent whose log in a shared store was taken over by another owner (another node, once the
//! agent's lease ran out) stops at its next step: the request fails naming the fencing, no
//! model call is made and no tool runs that the log could not hold first, the agent is let go
//! (stopped for good: its rebuild is refused the log), and the log keeps one history. On the Postgres server `.ci/run` starts (`TROUPE_TEST_POSTGRES`; under
//! `CI=true` its absence fails the test).

use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_session::{SessionClaim, SessionError, SessionSync};

use super::durable_steps::{Runs, spec, team};

#[path = "../../../session/tests/suite/backends.rs"]
#[allow(dead_code, unused_imports, unused_macros)]
mod backends;

/// Take `log` over in `store` as another node would once its holder's lease ran out (run
/// beside the test's runtime: the SQL helper has a runtime of its own).
fn take_over(
    url: String,
    store: troupe_session::SessionStore,
    log: std::path::PathBuf,
) -> (SessionSync, SessionClaim) {
    std::thread::spawn(move || {
        let name = log.to_string_lossy().into_owned();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let name = name.clone();
            backends::sql(&url, move |client| {
                Box::pin(async move {
                    client
                        .execute(
                            "UPDATE troupe_session_leases
                             SET expires_at = now() - interval '1 second' WHERE log = $1",
                            &[&name],
                        )
                        .await
                        .unwrap();
                })
            });
            let claim = SessionClaim::new(store.clone());
            match SessionSync::open(&log, "coder", Some(&claim)) {
                Ok((sync, _)) => return (sync, claim),
                // The holder's renewal came between the two: again.
                Err(SessionError::Leased { .. }) if Instant::now() < deadline => {}
                Err(e) => panic!("{e:?}"),
            }
        }
    })
    .join()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_agent_stops_before_its_next_model_call_and_writes_nothing_more() {
    let options = troupe_session::PostgresOptions::default()
        .node("node-a")
        .lease(Duration::from_secs(60));
    let Some(backend) = backends::Backend::postgres_with(options) else {
        return;
    };
    let log = backend.log("coder");
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new(
        "m",
        vec![
            ScriptedReply::text("first"),
            ScriptedReply::call("run", r#"{"command": "a"}"#),
            ScriptedReply::text("done"),
        ],
    ));
    let team = team().await;
    troupe_agents::spawn_agent(
        &team,
        spec(model.clone(), &runs, &log).session_store(backend.store.clone()),
    )
    .await
    .unwrap();
    assert_eq!(team.ask("coder", "one").await.unwrap(), "first");

    let other = backend.another("node-b", Duration::from_secs(60));
    let (_b_sync, _b_claim) = take_over(backend.url().to_string(), other, log.clone());

    let refused = team.ask("coder", "two").await.unwrap_err().to_string();
    assert!(refused.contains("the request stops"), "{refused}");
    assert!(refused.contains("no longer held"), "{refused}");
    assert!(refused.contains("node-b holds it"), "{refused}");
    // No model call after the one the log holds, no tool run.
    assert_eq!(model.requests().len(), 1);
    assert!(runs.lock().unwrap().is_empty());
    // And the agent goes: its rebuild is refused the log, which stops it for good; no request
    // reaches the model again.
    let deadline = Instant::now() + Duration::from_secs(120);
    let stopped = loop {
        match team.ask("coder", "three").await {
            Err(troupe_runtime::AskError::AgentStopped { reason, .. }) => break reason,
            other => {
                assert!(other.is_err(), "{other:?}");
                assert!(
                    Instant::now() < deadline,
                    "the fenced agent was not let go: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(stopped.contains("no longer held"), "{stopped}");
    assert_eq!(model.requests().len(), 1);
    team.shutdown().await;
    // The log holds the first request alone: nothing of the fenced writer after node B began.
    let store = backend.store.clone();
    let loaded = tokio::task::spawn_blocking(move || store.load(&log))
        .await
        .unwrap()
        .unwrap();
    let texts: Vec<String> = loaded
        .conversation
        .messages()
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["one", "first"]);
    assert!(!loaded.in_flight);
}
