//! Hostile peers: each gets a clear error within bounded memory and time.

use std::time::Duration;

use troupe_a2a::{A2aClient, A2aError, A2aRemote, ClientLimits, join_team};
use troupe_runtime::AskError;

use super::support::{PeerScript, empty_team, fake_peer};

fn small_limits() -> ClientLimits {
    ClientLimits {
        answer_bytes: 64 * 1024,
        body_bytes: 1024 * 1024,
        idle: Duration::from_millis(300),
        ..ClientLimits::default()
    }
}

#[tokio::test]
async fn a_huge_card_is_refused_at_its_cap() {
    let (base, _) = fake_peer(PeerScript::HugeCard(4 * 1024 * 1024), true).await;
    let err = A2aClient::connect(&A2aRemote::new(base)).await.unwrap_err();
    assert!(
        matches!(err, A2aError::TooLarge { cap, .. } if cap == ClientLimits::default().card_bytes),
        "{err}"
    );
    assert!(err.to_string().contains("the agent card is over"), "{err}");
}

#[tokio::test]
async fn a_card_pointing_at_another_host_is_refused() {
    let (base, log) = fake_peer(PeerScript::CardElsewhere, true).await;
    let err = A2aClient::connect(&A2aRemote::new(base)).await.unwrap_err();
    assert!(matches!(err, A2aError::OtherHost { .. }), "{err}");
    assert!(err.to_string().contains("169.254.169.254"), "{err}");
    assert!(log.lock().unwrap().methods.is_empty());
}

#[tokio::test]
async fn an_endless_stream_ends_at_the_answer_cap_and_its_task_is_cancelled() {
    let (base, log) = fake_peer(PeerScript::EndlessStream, true).await;
    let team = empty_team().await;
    join_team(
        &team,
        "ticker",
        &A2aRemote::new(base).limits(small_limits()),
    )
    .await
    .unwrap();
    let err = team.ask("ticker", "count").await.unwrap_err();
    let AskError::Agent { error: e, .. } = &err else {
        panic!("{err}")
    };
    assert!(
        e.to_string()
            .contains("the agent's answer is over the 65536-byte limit"),
        "{e}"
    );
    // The unfinished task is cancelled (from a spawned task: wait for it to arrive).
    for _ in 0..200 {
        if log
            .lock()
            .unwrap()
            .methods
            .iter()
            .any(|m| m == "CancelTask")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    {
        let log = log.lock().unwrap();
        assert_eq!(log.methods, ["SendStreamingMessage", "CancelTask"]);
        assert_eq!(log.params[1]["id"], "t1");
    }
    team.shutdown().await;
}

#[tokio::test]
async fn a_silent_stream_ends_at_the_idle_limit() {
    let (base, _) = fake_peer(PeerScript::SilentStream, true).await;
    let team = empty_team().await;
    join_team(&team, "mute", &A2aRemote::new(base).limits(small_limits()))
        .await
        .unwrap();
    let err = team.ask("mute", "hello?").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("waiting for the agent's next streamed event: no answer within 0.3 s"),
        "{err}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn an_event_of_a_task_this_request_does_not_own_is_refused() {
    let (base, _) = fake_peer(PeerScript::ForeignTask, true).await;
    let team = empty_team().await;
    join_team(&team, "liar", &A2aRemote::new(base))
        .await
        .unwrap();
    let err = team.ask("liar", "hi").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("an event of task `t2` during task `t1`: refused"),
        "{err}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_100_mb_answer_is_refused_at_the_body_cap() {
    let (base, _) = fake_peer(PeerScript::HugeAnswer(100 * 1024 * 1024), false).await;
    let team = empty_team().await;
    join_team(&team, "flood", &A2aRemote::new(base).limits(small_limits()))
        .await
        .unwrap();
    let err = team.ask("flood", "hi").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("calling SendMessage is over the 1048576-byte limit"),
        "{err}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_streamed_event_past_its_cap_ends_the_request_naming_it() {
    // One `data:` line of 128 KiB against a 64 KiB cap on a streamed event (and its line).
    let (base, _log) = fake_peer(PeerScript::HugeEvent(128 * 1024), true).await;
    let team = empty_team().await;
    let limits = ClientLimits {
        event_bytes: 64 * 1024,
        ..small_limits()
    };
    join_team(&team, "shouter", &A2aRemote::new(base).limits(limits))
        .await
        .unwrap();
    let err = team.ask("shouter", "speak").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("a streamed line is over the 65536-byte limit"),
        "{err}"
    );
    team.shutdown().await;
}
