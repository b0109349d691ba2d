use std::sync::Arc;
use std::time::Duration;

use troupe_protocol::Event;
use troupe_runtime::{
    AgentError, AskError, BehaviorFactory, Checkpoint, RestartPolicy, SpawnError, Team, TeamConfig,
    TeamError,
};

use super::support::{Echo, echo_factory};

async fn team_with(policy: RestartPolicy) -> Team {
    let config = TeamConfig {
        restart: policy,
        ..TeamConfig::default()
    };
    Team::start(config).await.unwrap()
}

#[tokio::test]
async fn a_panicking_agent_is_restarted_with_its_conversation_intact() {
    let team = team_with(RestartPolicy {
        max_restarts: 3,
        window: Duration::from_secs(60),
    })
    .await;
    let mut events = team.subscribe();
    team.spawn("echo", echo_factory()).await.unwrap();
    team.ask("echo", "one").await.unwrap();
    team.ask("echo", "two").await.unwrap();

    let err = team.ask("echo", "panic").await.unwrap_err();
    match &err {
        AskError::AgentFailed { name, reason } => {
            assert_eq!(name, "echo");
            assert!(
                reason.contains("boom"),
                "reason should carry the panic message: {reason}"
            );
            assert!(reason.contains("restarted"), "{reason}");
        }
        other => panic!("expected AgentFailed, got {other:?}"),
    }

    // The restarted agent still knows what it was told before the panic.
    assert_eq!(team.ask("echo", "history").await.unwrap(), "one|two");
    let restarted = loop {
        let record = events.recv().await.unwrap();
        if let Event::AgentRestarted {
            agent, restarts, ..
        } = record.event
        {
            break (agent, restarts);
        }
    };
    assert_eq!(restarted, ("echo".to_string(), 1));
    team.shutdown().await;
}

#[tokio::test]
async fn the_checkpoint_follows_the_conversation_through_rewrites_and_restarts() {
    let team = team_with(RestartPolicy {
        max_restarts: 10,
        window: Duration::from_secs(60),
    })
    .await;
    team.spawn("echo", echo_factory()).await.unwrap();
    let live = || async {
        team.with_agent("echo", |e: &mut Echo| e.conversation().clone())
            .await
            .unwrap()
            .unwrap()
    };
    for text in ["one", "two"] {
        team.ask("echo", text).await.unwrap();
    }
    assert_eq!(team.checkpoint("echo").unwrap().conversation, live().await);

    // A rewrite (same length, other messages), then more: the checkpoint has the rewrite.
    team.ask("echo", "shout").await.unwrap();
    team.ask("echo", "three").await.unwrap();
    assert_eq!(team.checkpoint("echo").unwrap().conversation, live().await);
    let _ = team.ask("echo", "panic").await.unwrap_err();
    assert_eq!(team.ask("echo", "history").await.unwrap(), "ONE|TWO|three");

    // The restarted agent's checkpoint goes on following it, across another restart.
    team.ask("echo", "four").await.unwrap();
    let _ = team.ask("echo", "fatal").await.unwrap_err();
    assert_eq!(
        team.ask("echo", "history").await.unwrap(),
        "ONE|TWO|three|four"
    );
    assert_eq!(team.checkpoint("echo").unwrap().conversation, live().await);
    team.shutdown().await;
}

#[tokio::test]
async fn after_too_many_failures_in_the_window_the_caller_gets_an_error() {
    let team = team_with(RestartPolicy {
        max_restarts: 2,
        window: Duration::from_secs(60),
    })
    .await;
    team.spawn("echo", echo_factory()).await.unwrap();
    for _ in 0..2 {
        assert!(matches!(
            team.ask("echo", "fatal").await,
            Err(AskError::Agent { .. })
        ));
    }
    // Third failure exceeds the limit of two restarts.
    let third = team.ask("echo", "panic").await.unwrap_err();
    let AskError::AgentFailed { reason, .. } = &third else {
        panic!("{third:?}")
    };
    assert!(reason.contains("agent stopped"), "{reason}");

    let after = team.ask("echo", "hello").await.unwrap_err();
    match after {
        AskError::AgentStopped { name, reason } => {
            assert_eq!(name, "echo");
            assert!(reason.contains("failed 3 times"), "{reason}");
        }
        other => panic!("expected AgentStopped, got {other:?}"),
    }
    team.shutdown().await;
}

#[tokio::test]
async fn an_agent_that_cannot_be_rebuilt_is_stopped_for_good_like_one_that_failed_too_often() {
    let team = team_with(RestartPolicy::default()).await;
    let mut events = team.subscribe();
    let fresh_only: BehaviorFactory = Arc::new(|checkpoint: Option<Checkpoint>| {
        if checkpoint.is_some() {
            return Err(AgentError::Failed(
                "the checkpoint cannot be restored".into(),
            ));
        }
        echo_factory()(None)
    });
    team.spawn("echo", fresh_only).await.unwrap();
    team.ask("echo", "one").await.unwrap();

    let failed = team.ask("echo", "panic").await.unwrap_err();
    let AskError::AgentFailed { reason, .. } = &failed else {
        panic!("{failed:?}")
    };
    assert!(reason.contains("agent stopped: restart failed"), "{reason}");
    assert!(reason.contains("cannot be restored"), "{reason}");

    match team.ask("echo", "hello").await.unwrap_err() {
        AskError::AgentStopped { name, reason } => {
            assert_eq!(name, "echo");
            assert!(reason.starts_with("restart failed"), "{reason}");
        }
        other => panic!("expected AgentStopped, got {other:?}"),
    }
    let stopped = loop {
        let record = events.recv().await.unwrap();
        if let Event::AgentStopped { agent, reason } = record.event {
            break (agent, reason);
        }
    };
    assert_eq!(stopped.0, "echo");
    assert!(stopped.1.contains("cannot be restored"), "{}", stopped.1);
    team.shutdown().await;
}

#[tokio::test]
async fn failures_outside_the_window_do_not_count() {
    let team = team_with(RestartPolicy {
        max_restarts: 1,
        window: Duration::from_millis(200),
    })
    .await;
    team.spawn("echo", echo_factory()).await.unwrap();
    team.ask("echo", "fatal").await.unwrap_err();
    tokio::time::sleep(Duration::from_millis(300)).await;
    team.ask("echo", "fatal").await.unwrap_err();
    assert_eq!(team.ask("echo", "hi").await.unwrap(), "echo: hi");
    team.shutdown().await;
}

#[tokio::test]
async fn agents_ask_each_other_by_name_in_one_trace() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("alice", echo_factory()).await.unwrap();
    team.spawn("bob", echo_factory()).await.unwrap();
    let answer = team.ask("alice", "ask bob hello").await.unwrap();
    assert_eq!(answer, "alice relayed: bob: hello");
    team.shutdown().await;
}

#[tokio::test]
async fn asking_a_missing_agent_names_the_known_ones() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("alice", echo_factory()).await.unwrap();
    let err = team.ask("carol", "hi").await.unwrap_err();
    assert_eq!(
        err,
        AskError::NoSuchAgent {
            name: "carol".into(),
            known: vec!["alice".into()]
        }
    );
    assert_eq!(
        err.to_string(),
        "no agent named `carol` (known agents: alice)"
    );
    // An agent relaying to a missing agent reports it too.
    let relayed = team.ask("alice", "ask carol hi").await.unwrap_err();
    assert!(
        relayed.to_string().contains("no agent named `carol`"),
        "{relayed}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn ask_times_out() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("slow", echo_factory()).await.unwrap();
    let request = troupe_runtime::AgentRequest::from_user("sleep 500");
    let err = team
        .ask_with("slow", request, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AskError::Timeout {
            name: "slow".into(),
            timeout: Duration::from_millis(50)
        }
    );
    team.shutdown().await;
}

#[tokio::test]
async fn duplicate_and_invalid_names_are_refused() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("a", echo_factory()).await.unwrap();
    let dup = team.spawn("a", echo_factory()).await.unwrap_err();
    assert_eq!(dup, TeamError::Spawn(SpawnError::DuplicateName("a".into())));
    let bad = team.spawn("has space", echo_factory()).await.unwrap_err();
    assert!(matches!(bad, TeamError::Spawn(SpawnError::InvalidName(_))));
    team.shutdown().await;
}

#[tokio::test]
async fn spawn_many_reports_each_agent_and_spawns_the_valid_ones() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("taken", echo_factory()).await.unwrap();
    let failing: troupe_runtime::BehaviorFactory =
        std::sync::Arc::new(|_| Err(troupe_runtime::AgentError::Failed("no config".into())));
    let results = team
        .spawn_many([
            ("w1".to_string(), echo_factory()),
            ("bad name".to_string(), echo_factory()),
            ("taken".to_string(), echo_factory()),
            ("broken".to_string(), failing),
            ("w2".to_string(), echo_factory()),
            ("w1".to_string(), echo_factory()),
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 6);
    assert_eq!(results[0], Ok(()));
    assert!(matches!(results[1], Err(SpawnError::InvalidName(_))));
    assert_eq!(results[2], Err(SpawnError::DuplicateName("taken".into())));
    assert!(
        matches!(&results[3], Err(SpawnError::Build { name, reason }) if name == "broken" && reason.contains("no config")),
        "{:?}",
        results[3]
    );
    assert_eq!(results[4], Ok(()));
    assert_eq!(results[5], Err(SpawnError::DuplicateName("w1".into())));
    assert_eq!(team.ask("w1", "hi").await.unwrap(), "w1: hi");
    assert_eq!(team.ask("w2", "hi").await.unwrap(), "w2: hi");
    assert!(team.ask("broken", "hi").await.is_err());
    team.shutdown().await;
}

#[tokio::test]
async fn requests_from_one_sender_are_handled_in_order() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("echo", echo_factory()).await.unwrap();
    for i in 0..20 {
        team.send("echo", format!("n{i}")).await.unwrap();
    }
    let expected: Vec<String> = (0..20).map(|i| format!("n{i}")).collect();
    assert_eq!(
        team.ask("echo", "history").await.unwrap(),
        expected.join("|")
    );
    team.shutdown().await;
}

#[tokio::test]
async fn with_agent_gives_typed_access_and_shutdown_refuses_new_work() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    team.spawn("echo", echo_factory()).await.unwrap();
    team.ask("echo", "x").await.unwrap();
    let len = team
        .with_agent("echo", |e: &mut Echo| e.checkpoint_len())
        .await
        .unwrap();
    assert_eq!(len, Some(1));
    let dir = team.directory().clone();
    team.shutdown().await;
    let err = dir
        .ask(
            "echo",
            troupe_runtime::AgentRequest::from_user("late"),
            Duration::from_secs(1),
        )
        .await;
    assert_eq!(err.unwrap_err(), AskError::ShutDown);
}

#[tokio::test]
async fn a_retired_agent_is_stopped_and_forgotten_and_its_name_is_free_again() {
    let team = team_with(RestartPolicy::default()).await;
    let spawner = team.spawner();
    spawner.spawn("echo", echo_factory()).await.unwrap();
    team.ask("echo", "one").await.unwrap();
    assert!(team.checkpoint("echo").is_some());

    assert_eq!(spawner.retire("echo").await, Ok(true));
    // Gone, not failed: no restart, no checkpoint, no name.
    assert!(matches!(
        team.ask("echo", "two").await,
        Err(AskError::NoSuchAgent { .. })
    ));
    assert!(team.checkpoint("echo").is_none());
    assert!(!team.directory().names().contains(&"echo".to_string()));
    assert_eq!(spawner.retire("echo").await, Ok(false));

    // The name spawns again, from nothing: the old conversation is not restored.
    spawner.spawn("echo", echo_factory()).await.unwrap();
    team.ask("echo", "three").await.unwrap();
    assert_eq!(team.ask("echo", "history").await.unwrap(), "three");
    team.shutdown().await;
    assert!(matches!(
        spawner.spawn("late", echo_factory()).await,
        Err(TeamError::Spawn(SpawnError::ShutDown))
    ));
}
