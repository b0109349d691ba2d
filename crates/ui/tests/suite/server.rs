//! The view's server: the token, the origin, the feed, what model text is served as, the
//! approval answers, and a finished run read-only.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use std::sync::Arc;
use troupe_protocol::ApprovalId;
use troupe_protocol::{Event, EventRecord};

use troupe_agents::AgentSpec;
use troupe_agents::TeamBuilderExt as _;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_ui::{UiConfig, serve, serve_session, serve_trace};

use super::support::{
    HOSTILE, Runs, WRITER_ANSWERS, base_of, client, run_tool, sse_events, sse_until, team, token_of,
};

/// The waiting calls the snapshot shows: id, arguments and the digest an answer names.
async fn shown_calls(base: &str, token: &str) -> Vec<(String, String, String)> {
    let snapshot: Value = client()
        .get(format!("{base}api/snapshot?token={token}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    snapshot["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let text = |key: &str| a[key].as_str().unwrap().to_string();
            (text("id"), text("arguments"), text("digest"))
        })
        .collect()
}

#[tokio::test]
async fn it_binds_loopback_on_a_random_port_with_a_fresh_token_and_warns_elsewhere() {
    let runs = Runs::default();
    let (team, _) = team(&runs).await;
    let a = serve(&team, UiConfig::default()).await.unwrap();
    let b = serve(&team, UiConfig::default()).await.unwrap();
    assert!(a.addr().ip().is_loopback());
    assert_ne!(a.addr().port(), 0);
    assert_ne!(a.addr().port(), b.addr().port());
    let token = token_of(a.url());
    assert_eq!(token.len(), 32);
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(token, token_of(b.url()));
    assert!(UiConfig::default().exposure_warning().is_none());
    let exposed = UiConfig {
        bind: SocketAddr::from(([0, 0, 0, 0], 0)),
        ..UiConfig::default()
    };
    assert!(exposed.exposure_warning().unwrap().contains("0.0.0.0"));
    a.shutdown().await;
    b.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn every_request_needs_the_token() {
    let runs = Runs::default();
    let (team, _) = team(&runs).await;
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let http = client();
    for path in ["", "app.js", "app.css", "api/snapshot", "api/events"] {
        let none = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(
            none.status(),
            StatusCode::UNAUTHORIZED,
            "{path} without a token"
        );
        let wrong = http
            .get(format!("{base}{path}?token={}", "0".repeat(32)))
            .send()
            .await
            .unwrap();
        assert_eq!(
            wrong.status(),
            StatusCode::UNAUTHORIZED,
            "{path} with a wrong one"
        );
    }
    let no_token_post = http
        .post(format!("{base}api/approvals/approve"))
        .json(&serde_json::json!({ "id": "coder:x" }))
        .send()
        .await
        .unwrap();
    assert_eq!(no_token_post.status(), StatusCode::UNAUTHORIZED);
    for path in ["", "app.js", "app.css", "api/snapshot"] {
        let ok = http
            .get(format!("{base}{path}?token={token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), StatusCode::OK, "{path} with the token");
    }
    let by_header = http
        .get(format!("{base}api/snapshot"))
        .header("x-troupe-token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(by_header.status(), StatusCode::OK);
    ui.shutdown().await;
    team.shutdown().await;
}

/// `coder` asked to clean up, until its two tool calls wait for an answer: the ask (to abort)
/// and the calls' ids.
async fn two_calls_waiting(
    team: &troupe_runtime::Team,
) -> (
    tokio::task::JoinHandle<Result<String, troupe_runtime::AskError>>,
    Vec<troupe_protocol::ApprovalId>,
) {
    let mut events = team.subscribe();
    let directory = team.directory().clone();
    let asking = tokio::spawn(async move {
        directory
            .ask(
                "coder",
                troupe_runtime::AgentRequest::from_user("clean up"),
                Duration::from_secs(60),
            )
            .await
    });
    let mut waiting = Vec::new();
    while waiting.len() < 2 {
        let record = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .unwrap();
        if let Event::ApprovalRequested { id, .. } = record.event {
            waiting.push(id);
        }
    }
    (asking, waiting)
}

#[tokio::test]
async fn a_request_from_another_origin_is_refused_and_answers_nothing() {
    let runs = Runs::default();
    let (team, _) = team(&runs).await;
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let http = client();
    let (asking, mut waiting) = two_calls_waiting(&team).await;
    // Even with the token, another origin neither reads nor acts.
    let read = http
        .get(format!("{base}api/snapshot?token={token}"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::FORBIDDEN);
    let act = http
        .post(format!("{base}api/approvals/approve"))
        .header("origin", "http://evil.example")
        .header("x-troupe-token", &token)
        .json(&serde_json::json!({ "id": waiting[0] }))
        .send()
        .await
        .unwrap();
    assert_eq!(act.status(), StatusCode::FORBIDDEN);
    let cross_site = http
        .post(format!("{base}api/approvals/approve"))
        .header("sec-fetch-site", "cross-site")
        .header("x-troupe-token", &token)
        .json(&serde_json::json!({ "id": waiting[0] }))
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), StatusCode::FORBIDDEN);
    // Another port of the same host is the same site, and a no-cors GET has no `Origin`.
    let same_site = http
        .get(format!("{base}api/snapshot?token={token}"))
        .header("sec-fetch-site", "same-site")
        .send()
        .await
        .unwrap();
    assert_eq!(same_site.status(), StatusCode::FORBIDDEN);
    let own_page = http
        .get(format!("{base}api/snapshot?token={token}"))
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(own_page.status(), StatusCode::OK);
    let mut still = team.approvals().waiting();
    still.sort();
    waiting.sort();
    assert_eq!(still, waiting, "nothing was answered");
    // The page's own origin is served.
    let own = format!("http://{}", ui.addr());
    for (id, _, digest) in shown_calls(&base, &token).await {
        let deny = http
            .post(format!("{base}api/approvals/deny"))
            .header("origin", &own)
            .header("x-troupe-token", &token)
            .json(&serde_json::json!({ "id": id, "digest": digest }))
            .send()
            .await
            .unwrap();
        assert_eq!(deny.status(), StatusCode::NO_CONTENT);
    }
    assert_eq!(asking.await.unwrap().unwrap(), "done");
    assert!(runs.lock().unwrap().is_empty());
    ui.shutdown().await;
    team.shutdown().await;
}

/// What a page elsewhere can send without a preflight (a text/plain POST, a form with
/// `Origin: null`) and a name rebound to loopback (a foreign `Host`), each with the token a page
/// could have stolen: nothing is read and no waiting call is answered.
#[tokio::test]
async fn a_cross_site_post_a_null_origin_form_and_a_rebound_host_read_and_run_nothing() {
    let runs = Runs::default();
    let (team, _) = team(&runs).await;
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let port = ui.addr().port();
    let http = client();
    let (asking, mut waiting) = two_calls_waiting(&team).await;
    let answer = serde_json::json!({ "id": waiting[0] }).to_string();
    let text_plain = http
        .post(format!("{base}api/approvals/approve?token={token}"))
        .header("origin", "http://evil.example")
        .header("content-type", "text/plain")
        .body(answer.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(text_plain.status(), StatusCode::FORBIDDEN);
    let form = http
        .post(format!("{base}api/approvals/approve?token={token}"))
        .header("origin", "null")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("id={}", waiting[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), StatusCode::FORBIDDEN);
    for host in [
        format!("attacker.example:{port}"),
        "attacker.example".to_string(),
    ] {
        let read = http
            .get(format!("{base}api/snapshot?token={token}"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), StatusCode::FORBIDDEN, "{host}");
        let body = read.text().await.unwrap();
        assert!(
            !body.contains("coder"),
            "nothing of the team is read: {body}"
        );
        let act = http
            .post(format!("{base}api/approvals/approve"))
            .header("host", &host)
            .header("x-troupe-token", &token)
            .json(&serde_json::json!({ "id": waiting[0] }))
            .send()
            .await
            .unwrap();
        assert_eq!(act.status(), StatusCode::FORBIDDEN, "{host}");
    }
    let mut still = team.approvals().waiting();
    still.sort();
    waiting.sort();
    assert_eq!(still, waiting, "nothing was answered");
    asking.abort();
    ui.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn approve_and_deny_answer_only_the_call_shown_and_the_agent_does_what_was_chosen() {
    let runs = Runs::default();
    let (team, coder) = team(&runs).await;
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let http = client();
    let mut events = team.subscribe();
    let asking = {
        let directory = team.directory().clone();
        tokio::spawn(async move {
            directory
                .ask(
                    "coder",
                    troupe_runtime::AgentRequest::from_user("clean up"),
                    Duration::from_secs(60),
                )
                .await
        })
    };
    let mut waiting = Vec::new();
    while waiting.len() < 2 {
        let record = events.recv().await.unwrap();
        if let Event::ApprovalRequested { id, arguments, .. } = record.event {
            waiting.push((id, arguments));
        }
    }
    // The snapshot shows both calls with their exact arguments.
    let snapshot: Value = http
        .get(format!("{base}api/snapshot?token={token}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let shown: Vec<(String, String)> = snapshot["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["id"].as_str().unwrap().to_string(),
                a["arguments"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = waiting
        .iter()
        .map(|(id, args)| (id.0.clone(), args.clone()))
        .collect();
    assert_eq!(shown, expected);
    let coder_view = snapshot["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "coder")
        .unwrap();
    assert_eq!(coder_view["state"], "waiting_for_approval");
    let calls = shown_calls(&base, &token).await;
    let call_of = |needle: &str| -> (ApprovalId, String) {
        let (id, _, digest) = calls
            .iter()
            .find(|(_, args, _)| args.contains(needle))
            .unwrap();
        (ApprovalId(id.clone()), digest.clone())
    };
    let post = |decision: &'static str, id: ApprovalId, digest: String| {
        let http = http.clone();
        let (base, token) = (base.clone(), token.clone());
        async move {
            http.post(format!("{base}api/approvals/{decision}"))
                .header("x-troupe-token", token)
                .json(&serde_json::json!({ "id": id, "digest": digest, "reason": "not that one" }))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let ((build, build_shown), (data, data_shown)) = (call_of("build"), call_of("/data"));
    // An answer that names a call with what was shown of another (or of nothing) answers
    // nothing: both calls still wait, nothing ran.
    for decision in ["approve", "deny"] {
        for (id, digest) in [
            (build.clone(), data_shown.clone()),
            (data.clone(), build_shown.clone()),
            (build.clone(), "0".repeat(64)),
        ] {
            assert_eq!(
                post(decision, id.clone(), digest).await,
                StatusCode::CONFLICT,
                "{decision} {id}"
            );
        }
    }
    let mut still = team.approvals().waiting();
    still.sort();
    let mut both = vec![build.clone(), data.clone()];
    both.sort();
    assert_eq!(still, both, "a mismatched answer answered a call");
    assert!(runs.lock().unwrap().is_empty());
    assert_eq!(
        post("approve", build.clone(), build_shown.clone()).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        post("deny", data.clone(), data_shown.clone()).await,
        StatusCode::NO_CONTENT
    );
    // Answered once: a second answer names nothing waiting.
    assert_eq!(post("deny", data, data_shown).await, StatusCode::CONFLICT);
    assert_eq!(
        post("approve", build, build_shown).await,
        StatusCode::CONFLICT
    );
    assert_eq!(asking.await.unwrap().unwrap(), "done");
    assert_eq!(*runs.lock().unwrap(), ["rm -rf build"]);
    let last = coder.requests().last().unwrap().clone();
    let results: Vec<String> = last
        .messages
        .iter()
        .filter(|m| m.role == troupe_protocol::Role::Tool)
        .map(|m| m.text())
        .collect();
    assert!(
        results.iter().any(|r| r.contains("ran rm -rf build")),
        "{results:?}"
    );
    assert!(
        results.iter().any(|r| r.contains("not that one")),
        "{results:?}"
    );
    ui.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn model_text_leaves_the_server_only_as_escaped_json() {
    let runs = Runs::default();
    let (team, _) = team(&runs).await;
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let http = client();
    let live = http
        .get(format!("{base}api/events?token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        live.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    team.events().publish(
        None,
        Event::ModelDelta {
            agent: "writer".into(),
            text: HOSTILE.into(),
        },
    );
    let streamed = sse_events(live, 2).await;
    assert_eq!(streamed[0].0, "snapshot");
    assert_eq!(streamed[1].0, "patch");
    let snapshot = http
        .get(format!("{base}api/snapshot?token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(snapshot.headers()["content-type"], "application/json");
    assert_eq!(snapshot.headers()["x-content-type-options"], "nosniff");
    let body = snapshot.text().await.unwrap();
    for served in [body.as_str(), streamed[1].1.as_str()] {
        assert!(!served.contains('<') && !served.contains('>'), "{served}");
        assert!(served.contains("\\u003cscript\\u003e"), "{served}");
        let value: Value = serde_json::from_str(served).unwrap();
        assert!(value.to_string().contains("<img src=x onerror="));
    }
    let page = http
        .get(format!("{base}?token={token}"))
        .send()
        .await
        .unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"));
    let html = page.text().await.unwrap();
    assert!(!html.contains("__pwned"));
    // The page's script never parses text as HTML.
    let js = http
        .get(format!("{base}app.js?token={token}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!js.contains("innerHTML") && !js.contains("insertAdjacentHTML"));
    ui.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_viewer_that_reads_nothing_never_holds_the_team_up_and_re_syncs_when_it_lagged() {
    let runs = Runs::default();
    let (team, _) = team(&runs).await;
    let config = UiConfig {
        viewer_queue: 8,
        history: 50,
        ..UiConfig::default()
    };
    let ui = serve(&team, config).await.unwrap();
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let http = client();
    // One viewer opens the feed and does not read it.
    let stuck = http
        .get(format!("{base}api/events?token={token}"))
        .send()
        .await
        .unwrap();
    while ui.viewers() < 1 {
        tokio::task::yield_now().await;
    }
    // Enough events, with enough text, to fill its queue and its socket many times over.
    let text = "x".repeat(16 * 1024);
    let mut watcher = team.subscribe();
    for i in 0..2_000 {
        team.events().publish(
            None,
            Event::ModelDelta {
                agent: format!("a{}", i % 4),
                text: text.clone(),
            },
        );
        if i % 100 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let last = loop {
        match watcher.recv().await {
            Ok(EventRecord { seq, .. }) if seq >= 2_000 => break seq,
            _ => {}
        }
    };
    // The view kept up with the team: its snapshot has the last event.
    let snapshot: Value = loop {
        let s: Value = http
            .get(format!("{base}api/snapshot?token={token}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if s["events"].as_array().unwrap().last().unwrap()["seq"] == last {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(snapshot["missed"], 0);
    // The stuck viewer now reads: its first snapshot, what fit in its queue, then `lagged` and
    // a snapshot with the newest state.
    let seen = sse_until(stuck, |seen| {
        seen.len() >= 2 && seen[seen.len() - 2].0 == "lagged"
    })
    .await;
    assert_eq!(seen[0].0, "snapshot");
    let lagged = seen.len() - 2;
    assert!(seen[1..lagged].iter().all(|(e, _)| e == "patch"));
    assert!(lagged < 2_000, "patches were dropped, not all queued");
    assert_eq!(seen[lagged + 1].0, "snapshot");
    let resync: Value = serde_json::from_str(&seen[lagged + 1].1).unwrap();
    assert!(resync["version"].as_u64().unwrap() > 100);
    // A closed viewer is dropped at the next event.
    drop(seen);
    team.events()
        .publish(None, Event::RequestStarted { agent: "a0".into() });
    ui.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_finished_run_opens_read_only_from_its_trace_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let span = |name: &str, id: &str, start: u64, end: u64, attrs: Value| {
        serde_json::json!({
            "type": "span", "name": name, "trace_id": "0af7651916cd43dd8448eb211c80319c",
            "span_id": id, "parent_span_id": null,
            "start_time_unix_nano": start * 1_000_000, "end_time_unix_nano": end * 1_000_000,
            "duration_ms": (end - start) as f64, "target": "troupe", "level": "INFO",
            "status": "ok", "attributes": attrs,
        })
        .to_string()
    };
    let lines = [
        span(
            "invoke_agent",
            "0000000000000001",
            1000,
            1900,
            serde_json::json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"}),
        ),
        span(
            "chat",
            "0000000000000002",
            1010,
            1100,
            serde_json::json!({"gen_ai.operation.name": "chat", "gen_ai.agent.name": "coder",
                                "gen_ai.request.model": "m-1", "gen_ai.usage.input_tokens": 900,
                                "gen_ai.usage.output_tokens": 40}),
        ),
        span(
            "compaction",
            "0000000000000003",
            1200,
            1300,
            serde_json::json!({"gen_ai.operation.name": "compaction", "gen_ai.agent.name": "coder",
                                "troupe.trigger": "manual", "troupe.compaction.tokens_before": 940,
                                "troupe.compaction.tokens_after": 300,
                                "troupe.compaction.receipt.net_saving": 1234.0,
                                "troupe.compaction.receipt.pricing": "openai"}),
        ),
        "not json".to_string(),
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let (ui, warnings) = serve_trace(&path, UiConfig::default()).await.unwrap();
    // The bad last line is said, by the reader `troupe trace` uses, and the rest is served.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("skipped an incomplete last line"),
        "{warnings:?}"
    );
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let http = client();
    let snapshot: Value = http
        .get(format!("{base}api/snapshot?token={token}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(snapshot["read_only"], true);
    let coder = &snapshot["agents"][0];
    assert_eq!(coder["name"], "coder");
    assert_eq!(coder["model"], "m-1");
    assert_eq!(coder["state"], "idle");
    assert_eq!(coder["tokens"], 940);
    let compaction = &snapshot["compactions"][0];
    assert_eq!(compaction["trigger"], "manual");
    assert_eq!(compaction["report"]["tokens_after"], 300);
    assert_eq!(compaction["report"]["receipt"]["net_saving"], 1234.0);
    assert_eq!(snapshot["events"].as_array().unwrap().len(), 6);
    let act = http
        .post(format!("{base}api/approvals/approve"))
        .header("x-troupe-token", &token)
        .json(&serde_json::json!({ "id": "coder:c1", "digest": "0".repeat(64) }))
        .send()
        .await
        .unwrap();
    assert_eq!(act.status(), StatusCode::CONFLICT);
    ui.shutdown().await;
}

#[tokio::test]
async fn a_session_log_opens_read_only_with_its_conversation_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("writer.jsonl");
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new(
        "scripted-writer",
        [
            ScriptedReply::call("run", r#"{"command": "ls"}"#),
            ScriptedReply::text(HOSTILE),
        ],
    ));
    let team = troupe_runtime::Team::builder()
        .agent(
            AgentSpec::new("writer", model)
                .tools(run_tool(&runs))
                .session(&log),
        )
        .start()
        .await
        .unwrap();
    team.ask("writer", "list, then answer").await.unwrap();
    team.shutdown().await;
    let ui = serve_session(
        &troupe_session::SessionStore::files(),
        &log,
        UiConfig::default(),
    )
    .await
    .unwrap();
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let body = client()
        .get(format!("{base}api/snapshot?token={token}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!body.contains('<'), "markup escaped in what is served");
    let snapshot: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(snapshot["read_only"], true);
    let conversation = &snapshot["conversation"];
    assert_eq!(conversation["agent"], "writer");
    let roles: Vec<&str> = conversation["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    let messages = conversation["messages"].as_array().unwrap();
    assert_eq!(messages[1]["tool_calls"][0][0], "run");
    assert_eq!(messages[2]["text"], "ran ls");
    assert_eq!(messages[3]["text"], HOSTILE);
    ui.shutdown().await;
}

/// GET `path` of the view with its token, as JSON (panics on a status other than 200).
async fn get_json(ui: &troupe_ui::UiServer, path: &str) -> Value {
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let response = client()
        .get(format!("{base}{path}"))
        .header("x-troupe-token", token)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    assert!(!body.contains('<'), "markup escaped in what is served");
    serde_json::from_str(&body).unwrap()
}

#[tokio::test]
async fn an_agents_conversation_shows_pins_and_where_each_summary_sits_and_its_archive_reads_back()
{
    let runs = Runs::default();
    let (team, _) = team(&runs).await;
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    for i in 0..WRITER_ANSWERS {
        team.ask("writer", format!("part {i}, please"))
            .await
            .unwrap();
    }
    let writer = team.agent::<troupe_agents::LlmAgent>("writer");
    let copy = writer.conversation().await.unwrap();
    let first = copy.conversation.messages()[0].clone();
    writer.pin(first.id, true).await.unwrap();
    writer.compact(None).await.unwrap();
    team.ask("writer", "and the last part").await.unwrap();

    let conversation = get_json(&ui, "api/conversation?agent=writer").await;
    assert_eq!(conversation["agent"], "writer");
    let messages = conversation["messages"].as_array().unwrap();
    let pinned: Vec<&Value> = messages.iter().filter(|m| m["pinned"] == true).collect();
    assert_eq!(pinned.len(), 1);
    assert_eq!(pinned[0]["text"], "part 0, please");
    // The summary sits where compaction put it, after the pinned question, naming what it
    // stands for; the answer after it is the hostile one, as text.
    let summary = messages
        .iter()
        .position(|m| m["kind"] == "summary")
        .expect("a summary in the conversation");
    assert!(summary > 0);
    let replaces = messages[summary]["replaces"].as_array().unwrap();
    assert!(!replaces.is_empty());
    assert_eq!(messages.last().unwrap()["text"], HOSTILE);
    let archive = writer.conversation().await.unwrap().archive;
    assert_eq!(
        conversation["archived"].as_u64().unwrap() as usize,
        archive.len()
    );

    // The archive: every original, newest first, and one read back verbatim by its id.
    let listing = get_json(&ui, "api/archive?agent=writer").await;
    let entries = listing["entries"].as_array().unwrap();
    assert_eq!(listing["total"].as_u64().unwrap() as usize, entries.len());
    let id = replaces[0].as_u64().unwrap();
    assert!(entries.iter().any(|e| e["id"] == id));
    let read = get_json(&ui, &format!("api/archive?agent=writer&id=m{id}")).await;
    let original = archive
        .original(troupe_protocol::MessageId(id))
        .unwrap()
        .message
        .text();
    assert_eq!(read["original"]["text"], original.as_str());
    // The summary's id reads back as the originals it stands for, as `recall` answers it.
    let summary_id = messages[summary]["id"].as_u64().unwrap();
    let stands_for = get_json(&ui, &format!("api/archive?agent=writer&id={summary_id}")).await;
    let ids: Vec<&Value> = stands_for["replaced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(ids, replaces.iter().collect::<Vec<_>>());
    // An id that names nothing archived is not found, and an unknown agent neither.
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    for path in [
        "api/archive?agent=writer&id=m99999",
        "api/conversation?agent=nobody",
    ] {
        let status = client()
            .get(format!("{base}{path}&token={token}"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    ui.shutdown().await;
    team.shutdown().await;
}

/// The window between the desk opening a call and its event reaching the view: the id the
/// page shows may name another call by then (a request opened again under it). An answer
/// given for what the page showed does not answer it.
#[tokio::test]
async fn an_id_that_names_another_call_by_now_is_not_answered() {
    let team = troupe_runtime::Team::start(troupe_runtime::TeamConfig::default())
        .await
        .unwrap();
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let id = team.approvals().mint("coder", "call_0");
    let ask = |arguments: &str| {
        team.events().publish(
            None,
            Event::ApprovalRequested {
                id: id.clone(),
                agent: "coder".into(),
                tool: "run".into(),
                arguments: arguments.into(),
            },
        );
    };
    let first = team
        .approvals()
        .open_call(id.clone(), "run", r#"{"command":"ls"}"#);
    ask(r#"{"command":"ls"}"#);
    let shown = loop {
        if let Some(call) = shown_calls(&base, &token).await.pop() {
            break call;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(shown.1, r#"{"command":"ls"}"#);
    // The call is answered elsewhere; the next turn asks under the same id, its event not yet
    // out.
    drop(first);
    let second = team
        .approvals()
        .open_call(id.clone(), "run", r#"{"command":"rm -rf /"}"#);
    let http = client();
    for decision in ["approve", "deny"] {
        let answer = http
            .post(format!("{base}api/approvals/{decision}"))
            .header("x-troupe-token", &token)
            .json(&serde_json::json!({ "id": id, "digest": shown.2 }))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::CONFLICT, "{decision}");
        assert_eq!(team.approvals().waiting(), vec![id.clone()]);
    }
    // Once shown, it is answered: exactly that call, as the model wrote it.
    ask(r#"{"command":"rm -rf /"}"#);
    let now = loop {
        let calls = shown_calls(&base, &token).await;
        if let Some(call) = calls.into_iter().find(|c| c.1.contains("rm")) {
            break call;
        }
        tokio::task::yield_now().await;
    };
    let answer = http
        .post(format!("{base}api/approvals/deny"))
        .header("x-troupe-token", &token)
        .json(&serde_json::json!({ "id": id, "digest": now.2, "reason": "no" }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        second.answer().await,
        Some(troupe_protocol::ApprovalDecision::Deny {
            reason: "no".into()
        })
    );
    ui.shutdown().await;
    team.shutdown().await;
}

/// An agent a node took over shows where it came from, where it is and the step it went on from.
#[tokio::test]
async fn an_agent_taken_over_by_another_node_shows_its_move() {
    let runs = Runs::default();
    let (team, _) = team(&runs).await;
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let http = client();
    team.events().publish(
        None,
        Event::AgentMoved {
            agent: "writer".to_string(),
            from: "node-b".to_string(),
            to: "node-c".to_string(),
            step: 7,
        },
    );
    let moved = loop {
        let snapshot: Value = http
            .get(format!("{base}api/snapshot?token={token}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let writer = snapshot["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "writer")
            .cloned();
        if let Some(moved) = writer.map(|w| w["moved"].clone()).filter(|m| !m.is_null()) {
            break moved;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        moved,
        serde_json::json!({"from": "node-b", "to": "node-c", "step": 7})
    );
    ui.shutdown().await;
    team.shutdown().await;
}
