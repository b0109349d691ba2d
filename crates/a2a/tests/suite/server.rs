//! `serve`: cards, the JSON-RPC methods, auth, and the body limit, driven over plain HTTP.

use futures::StreamExt as _;
use serde_json::json;
use troupe_a2a::{A2aServeConfig, ServedAgent, ServerAuth, serve};

use super::support::{
    KEY, Runs, auth, http, rpc, team_answering, team_asking_approval, team_asking_approval_for,
    team_over_budget, team_stuck, user_message,
};

fn config(agents: Vec<ServedAgent>) -> A2aServeConfig {
    A2aServeConfig::new("127.0.0.1:0".parse().unwrap(), agents, auth())
}

#[tokio::test]
async fn a_served_agent_has_a_card_and_answers_send_get_and_list() {
    let team = team_answering("42").await;
    let coder = ServedAgent::from_team(&team, "coder").await.unwrap();
    let sleeper = ServedAgent::new("sleeper", "never answers");
    let server = serve(&team, config(vec![coder, sleeper])).await.unwrap();
    let card: serde_json::Value = http()
        .get(server.card_url("coder"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["name"], "coder");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        server.agent_url("coder")
    );
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert!(
        card["skills"][0]["description"]
            .as_str()
            .unwrap()
            .contains("Rust code")
    );

    let url = server.agent_url("coder");
    let (status, sent) = rpc(
        &url,
        "SendMessage",
        json!({"message": user_message("answer?")}),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "42");
    let id = task["id"].as_str().unwrap();
    let (_, got) = rpc(&url, "GetTask", json!({"id": id}), &[]).await;
    assert_eq!(got["result"]["id"], id);
    assert_eq!(
        got["result"]["history"].as_array().unwrap().len(),
        2,
        "{got}"
    );
    let (_, listed) = rpc(
        &url,
        "ListTasks",
        json!({"contextId": task["contextId"]}),
        &[],
    )
    .await;
    assert_eq!(listed["result"]["totalSize"], 1);
    // Another agent's endpoint does not own the task; an unknown one is not found.
    let other = server.agent_url("sleeper");
    for method in ["GetTask", "CancelTask", "SubscribeToTask"] {
        let (_, foreign) = rpc(&other, method, json!({"id": id}), &[]).await;
        assert_eq!(foreign["error"]["code"], -32001, "{method}: {foreign}");
    }
    let (_, listed) = rpc(&other, "ListTasks", json!({}), &[]).await;
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
    let (_, missing) = rpc(&url, "GetTask", json!({"id": "nope"}), &[]).await;
    assert_eq!(missing["error"]["code"], -32001);
    // A finished task cannot be cancelled.
    let (_, cancel) = rpc(&url, "CancelTask", json!({"id": id}), &[]).await;
    assert_eq!(cancel["error"]["code"], -32002, "{cancel}");
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_running_task_is_cancelled_and_the_agent_is_free_again() {
    let team = team_stuck().await;
    let server = serve(
        &team,
        config(vec![ServedAgent::new("sleeper", "never answers")]),
    )
    .await
    .unwrap();
    let url = server.agent_url("sleeper");
    // Streamed, so the task id comes back at once.
    let response = http()
        .post(&url)
        .header("A2A-Version", "1.0")
        .bearer_auth(KEY)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": user_message("sleep")}}),
        )
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let first = String::from_utf8(body.next().await.unwrap().unwrap().to_vec()).unwrap();
    let data: serde_json::Value = serde_json::from_str(
        first
            .trim()
            .strip_prefix("data: ")
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let id = data["result"]["task"]["id"].as_str().unwrap().to_string();
    // A second caller subscribes to the running task (0.3's tasks/resubscribe).
    let subscribed = http()
        .post(&url)
        .header("A2A-Version", "1.0")
        .bearer_auth(KEY)
        .json(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask",
            "params": {"id": id}}),
        )
        .send()
        .await
        .unwrap();
    let mut subscriber = subscribed.bytes_stream();
    let snapshot = String::from_utf8(subscriber.next().await.unwrap().unwrap().to_vec()).unwrap();
    assert!(
        snapshot.contains(&id) && snapshot.contains("TASK_STATE_WORKING"),
        "{snapshot}"
    );
    let (_, cancelled) = rpc(&url, "CancelTask", json!({"id": id}), &[]).await;
    assert_eq!(
        cancelled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    // The stream ends with the cancellation.
    let mut rest = String::new();
    while let Some(chunk) = body.next().await {
        rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(rest.contains("TASK_STATE_CANCELED"), "{rest}");
    let mut seen = String::new();
    while let Some(chunk) = subscriber.next().await {
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(seen.contains("TASK_STATE_CANCELED"), "{seen}");
    // A finished task has nothing to subscribe to.
    let (_, late) = rpc(&url, "SubscribeToTask", json!({"id": id}), &[]).await;
    assert_eq!(late["error"]["code"], -32004, "{late}");
    // Every agent of the team is free, the context's own included.
    let names = team.directory().names();
    assert!(
        names.iter().any(|n| n.starts_with("sleeper.a2a-")),
        "{names:?}"
    );
    assert!(names.iter().all(|n| !team.is_responding(n)), "{names:?}");
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn without_the_key_a_request_is_refused_and_with_it_served() {
    let team = team_answering("ok").await;
    let auth = ServerAuth::bearer("tester", "s3cret-key-for-tests");
    assert!(!format!("{auth:?}").contains("s3cret"));
    let mut config = config(vec![ServedAgent::new("coder", "codes")]);
    config.auth = auth;
    let server = serve(&team, config).await.unwrap();
    let card: serde_json::Value = http()
        .get(server.card_url("coder"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    let url = server.agent_url("coder");
    let params = json!({"message": user_message("hi")});
    let (status, refused) = rpc(&url, "SendMessage", params.clone(), &[]).await;
    assert_eq!(status, 401, "{refused}");
    let (status, _) = rpc(
        &url,
        "SendMessage",
        params.clone(),
        &[("authorization", "Bearer wrong")],
    )
    .await;
    assert_eq!(status, 401);
    let (status, served) = rpc(
        &url,
        "SendMessage",
        params,
        &[("authorization", "Bearer s3cret-key-for-tests")],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        served["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_100_mb_message_is_refused_unread_with_a_clear_error() {
    let team = team_answering("ok").await;
    let server = serve(&team, config(vec![ServedAgent::new("coder", "codes")]))
        .await
        .unwrap();
    let url = server.agent_url("coder");
    let hundred_mb: u64 = 100 * 1024 * 1024;
    // Declared: refused on its Content-Length, before a byte of it is read.
    let chunk = bytes_chunk();
    let chunks = (hundred_mb / chunk.len() as u64) as usize;
    let body = futures::stream::iter(
        std::iter::repeat_n(chunk.clone(), chunks).map(Ok::<_, std::io::Error>),
    );
    let response = http()
        .post(&url)
        .header("content-type", "application/json")
        .header("A2A-Version", "1.0")
        .bearer_auth(KEY)
        .header("content-length", hundred_mb)
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await;
    // The server answers at once; the client may see the answer or a reset mid-upload.
    if let Ok(response) = response {
        assert_eq!(response.status(), 413);
        let answer: serde_json::Value = response.json().await.unwrap();
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("over the server's 8388608-byte limit"),
            "{answer}"
        );
    }
    // Undeclared (chunked): read up to the limit, then refused.
    let body =
        futures::stream::iter(std::iter::repeat_n(chunk, chunks).map(Ok::<_, std::io::Error>));
    let response = http()
        .post(&url)
        .header("content-type", "application/json")
        .header("A2A-Version", "1.0")
        .bearer_auth(KEY)
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await;
    if let Ok(response) = response {
        assert_eq!(response.status(), 413);
    }
    // The server is still serving.
    let (_, answer) = rpc(
        &url,
        "SendMessage",
        json!({"message": user_message("still there?")}),
        &[],
    )
    .await;
    assert_eq!(
        answer["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    server.shutdown().await;
    team.shutdown().await;
}

fn bytes_chunk() -> Vec<u8> {
    vec![b' '; 1024 * 1024]
}

#[tokio::test]
async fn a2a_0_3_is_refused_naming_the_version_troupe_speaks() {
    let team = team_answering("ok").await;
    let server = serve(&team, config(vec![ServedAgent::new("coder", "codes")]))
        .await
        .unwrap();
    let url = server.agent_url("coder");
    let (_, old) = rpc(&url, "message/send", json!({}), &[]).await;
    assert_eq!(old["error"]["code"], -32601);
    assert!(
        old["error"]["message"]
            .as_str()
            .unwrap()
            .contains("troupe speaks A2A 1.0"),
        "{old}"
    );
    let (_, version) = rpc(&url, "SendMessage", json!({}), &[("A2A-Version", "0.3")]).await;
    assert_eq!(version["error"]["code"], -32009, "{version}");
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_tool_call_waiting_for_approval_is_input_required_and_the_callers_yes_runs_it() {
    let runs = Runs::default();
    let team = team_asking_approval(&runs).await;
    let server = serve(
        &team,
        config(vec![ServedAgent::new("ops", "runs commands")]),
    )
    .await
    .unwrap();
    let url = server.agent_url("ops");
    let (_, asked) = rpc(
        &url,
        "SendMessage",
        json!({"message": user_message("clean up")}),
        &[],
    )
    .await;
    let task = &asked["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    let question = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(question.contains("`ops` asks to run `run`"), "{question}");
    assert!(question.contains("rm -rf build"), "{question}");
    assert!(runs.lock().unwrap().is_empty());
    let answer = json!({"messageId": "m-yes", "role": "ROLE_USER", "taskId": task["id"],
        "contextId": task["contextId"], "parts": [{"text": "yes"}]});
    let (_, done) = rpc(&url, "SendMessage", json!({"message": answer}), &[]).await;
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "removed");
    assert_eq!(*runs.lock().unwrap(), ["rm -rf build"]);
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn finished_tasks_outlive_a_server_restart_through_the_tasks_file() {
    let team = team_answering("kept").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.jsonl");
    let serve_with_file = || {
        let mut config = config(vec![ServedAgent::new("coder", "codes")]);
        config.tasks_file = Some(file.clone());
        config
    };
    let server = serve(&team, serve_with_file()).await.unwrap();
    let (_, sent) = rpc(
        &server.agent_url("coder"),
        "SendMessage",
        json!({"message": user_message("remember")}),
        &[],
    )
    .await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    server.shutdown().await;
    // A torn last line (a write cut short) is skipped, not fatal.
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("{\"agent\": \"coder\", \"task\": {\"id\": ");
    std::fs::write(&file, text).unwrap();

    let server = serve(&team, serve_with_file()).await.unwrap();
    let url = server.agent_url("coder");
    let (_, got) = rpc(&url, "GetTask", json!({"id": id}), &[]).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    assert_eq!(got["result"]["artifacts"][0]["parts"][0]["text"], "kept");
    let (_, listed) = rpc(&url, "ListTasks", json!({}), &[]).await;
    assert_eq!(listed["result"]["totalSize"], 1, "{listed}");
    // The file was rewritten with what was kept: the torn line is gone.
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 1);
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_budget_pause_that_runs_out_fails_the_input_required_task() {
    let team = team_over_budget(std::time::Duration::from_millis(200)).await;
    let server = serve(&team, config(vec![ServedAgent::new("spender", "spends")]))
        .await
        .unwrap();
    let response = http()
        .post(server.agent_url("spender"))
        .header("A2A-Version", "1.0")
        .bearer_auth(KEY)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": user_message("list")}}),
        )
        .send()
        .await
        .unwrap();
    // The stream ends where the task waits for its caller (as A2A has it)...
    let body = response.text().await.unwrap();
    assert!(body.contains("TASK_STATE_INPUT_REQUIRED"), "{body}");
    assert!(
        body.contains("`spender` is paused by its request budget"),
        "{body}"
    );
    let id = body
        .split("\"taskId\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("{body}"))
        .to_string();
    // ...and with no raise, the pause runs out and the task fails.
    let mut state = String::new();
    for _ in 0..400 {
        let (_, got) = rpc(
            &server.agent_url("spender"),
            "GetTask",
            json!({"id": id}),
            &[],
        )
        .await;
        state = got["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if state == "TASK_STATE_FAILED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(state, "TASK_STATE_FAILED");
    server.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_budget_pause_is_input_required_a_reply_cannot_raise_it_and_the_operators_raise_goes_on()
{
    use troupe_agents::LlmAgent;
    use troupe_protocol::{BudgetScope, SpendLimit};
    // The pause outlasts the test: only the operator's raise ends it.
    let team = team_over_budget(std::time::Duration::from_secs(600)).await;
    let server = serve(&team, config(vec![ServedAgent::new("spender", "spends")]))
        .await
        .unwrap();
    let url = server.agent_url("spender");
    let (_, paused) = rpc(
        &url,
        "SendMessage",
        json!({"message": user_message("list")}),
        &[],
    )
    .await;
    let task = &paused["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{paused}"
    );
    let asked = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{paused}"));
    assert!(
        asked.contains("`spender`")
            && asked.contains("request budget")
            && asked.contains("spent ")
            && asked.contains("limit 1 input tokens")
            && asked.contains("operator"),
        "{asked}"
    );
    // The caller's reply, however worded, raises nothing: it is told so and the task waits on.
    let reply = json!({"messageId": "m-raise", "role": "ROLE_USER", "taskId": task["id"],
        "parts": [{"text": "yes"}]});
    let (_, still) = rpc(&url, "SendMessage", json!({"message": reply}), &[]).await;
    let still = &still["result"]["task"];
    assert_eq!(
        still["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{still}"
    );
    let told = still["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        told.contains("still paused by its request budget")
            && told.contains("the operator must raise it"),
        "{told}"
    );
    let budget = team
        .directory()
        .agent::<LlmAgent>("spender")
        .budget()
        .unwrap();
    assert_eq!(
        budget.limit(BudgetScope::Request).unwrap().input_tokens,
        Some(1)
    );
    // The operator raises it: the task goes on to its answer.
    let watched = http()
        .post(&url)
        .header("A2A-Version", "1.0")
        .bearer_auth(KEY)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
            "params": {"id": task["id"]}}),
        )
        .send()
        .await
        .unwrap();
    budget
        .raise(
            BudgetScope::Request,
            SpendLimit {
                input_tokens: Some(1_000_000),
                ..SpendLimit::default()
            },
        )
        .unwrap();
    let body = watched.text().await.unwrap();
    let working = body
        .find("TASK_STATE_WORKING")
        .unwrap_or_else(|| panic!("{body}"));
    let done = body
        .find("TASK_STATE_COMPLETED")
        .unwrap_or_else(|| panic!("{body}"));
    assert!(working < done, "{body}");
    let (_, got) = rpc(&url, "GetTask", json!({"id": task["id"]}), &[]).await;
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"], "listed",
        "{got}"
    );
    server.shutdown().await;
    team.shutdown().await;
}

/// The next approval the team's agents ask for: its id and arguments.
async fn next_approval(
    events: &mut tokio::sync::broadcast::Receiver<troupe_protocol::EventRecord>,
) -> (troupe_protocol::ApprovalId, String) {
    loop {
        if let troupe_protocol::Event::ApprovalRequested { id, arguments, .. } =
            events.recv().await.unwrap().event
        {
            return (id, arguments);
        }
    }
}

#[tokio::test]
async fn a_callers_yes_decides_only_the_call_it_was_shown_never_one_waiting_after_it() {
    let runs = Runs::default();
    let team = team_asking_approval_for(&runs, &["rm -rf build", "rm -rf dist"]).await;
    let mut events = team.subscribe();
    let server = serve(
        &team,
        config(vec![ServedAgent::new("ops", "runs commands")]),
    )
    .await
    .unwrap();
    let url = server.agent_url("ops");
    let (_, asked) = rpc(
        &url,
        "SendMessage",
        json!({"message": user_message("clean up")}),
        &[],
    )
    .await;
    let task = asked["result"]["task"].clone();
    let shown = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(shown.contains("rm -rf build"), "{shown}");
    // The operator approves the shown call first; the agent runs it and asks about the next.
    let (first, _) = next_approval(&mut events).await;
    team.approve(&first).unwrap();
    let (_, second) = next_approval(&mut events).await;
    assert!(second.contains("rm -rf dist"), "{second}");
    // The caller's yes, sent for the call it was shown, decides nothing else.
    let yes = json!({"messageId": "m-yes", "role": "ROLE_USER", "taskId": task["id"],
        "contextId": task["contextId"], "parts": [{"text": "yes"}]});
    let (_, after) = rpc(&url, "SendMessage", json!({"message": yes}), &[]).await;
    let status = &after["result"]["task"]["status"];
    assert_eq!(status["state"], "TASK_STATE_INPUT_REQUIRED", "{after}");
    let now = status["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(now.contains("rm -rf dist"), "{now}");
    assert_eq!(*runs.lock().unwrap(), ["rm -rf build"]);
    // And it is told its answer decided nothing (with the next question, or just before it
    // when the answer came before the agent's next call reached the task).
    let told = after["result"]["task"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| {
            m["parts"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("already decided"))
        });
    assert!(told, "{after}");
    // Its answer to the call it is shown now is that call's.
    let no = json!({"messageId": "m-no", "role": "ROLE_USER", "taskId": task["id"],
        "contextId": task["contextId"], "parts": [{"text": "not that one"}]});
    let (_, done) = rpc(&url, "SendMessage", json!({"message": no}), &[]).await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    assert_eq!(*runs.lock().unwrap(), ["rm -rf build"]);
    server.shutdown().await;
    team.shutdown().await;
}
