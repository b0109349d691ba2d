//! A stream whose reader falls behind the agent is caught up, not ended: the answer so far
//! whole, then on from there, so what the reader rebuilds is the answer.

use std::time::Duration;

use serde_json::{Value, json};
use troupe_a2a::{A2aServeConfig, ServedAgent, serve};

use super::support::{KEY, auth, http, rpc, team_answering, user_message};

/// The answer text a stream's events build: appended chunks, or an artifact given whole.
fn rebuilt(body: &str) -> (String, Vec<String>) {
    let (mut text, mut states) = (String::new(), Vec::new());
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let event: Value = serde_json::from_str(data).unwrap();
        let result = &event["result"];
        if let Some(update) = result.get("artifactUpdate") {
            let chunk: String = update["artifact"]["parts"]
                .as_array()
                .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect())
                .unwrap_or_default();
            if update["append"] != true {
                text.clear();
            }
            text.push_str(&chunk);
        }
        if let Some(state) = result["statusUpdate"]["status"]["state"].as_str() {
            states.push(state.to_string());
        }
        assert!(event.get("error").is_none(), "{event}");
    }
    (text, states)
}

#[tokio::test]
async fn a_stream_read_too_slowly_is_caught_up_and_gets_the_whole_answer() {
    // 120,000 deltas of a few characters: far more events than a stream may fall behind, and
    // far more bytes than the socket's buffers hold while the reader waits.
    let answer = "word ".repeat(100_000);
    let team = team_answering(&answer).await;
    let coder = ServedAgent::from_team(&team, "coder").await.unwrap();
    let server = serve(
        &team,
        A2aServeConfig::new("127.0.0.1:0".parse().unwrap(), vec![coder], auth()),
    )
    .await
    .unwrap();
    let url = server.agent_url("coder");
    let response = http()
        .post(&url)
        .header("A2A-Version", "1.0")
        .bearer_auth(KEY)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": user_message("talk")}}),
        )
        .send()
        .await
        .unwrap();
    // Nothing is read until the task is over.
    let mut finished = false;
    for _ in 0..2400 {
        let (_, listed) = rpc(&url, "ListTasks", json!({}), &[]).await;
        if listed["result"]["tasks"][0]["status"]["state"] == "TASK_STATE_COMPLETED" {
            finished = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(finished, "the task did not finish within two minutes");
    let body = response.text().await.unwrap();
    let (text, states) = rebuilt(&body);
    assert_eq!(
        states.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED"),
        "{states:?}"
    );
    assert_eq!(text.len(), answer.len());
    assert!(text == answer, "the rebuilt answer differs");
    server.shutdown().await;
    team.shutdown().await;
}
