//! The page's actions on a live team: `/compact` an agent and raise the budget that paused
//! another. Refused without the token and from another origin (nothing done then); with them,
//! done, and the spend shows the raised limit.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::spend::{AgentBudget, OnExceeded};
use troupe_agents::{
    AgentSpec, CompactionSettings, TeamBuilderExt as _, WorkAhead, shared_counter, spawn_agent,
};
use troupe_compaction::ContextPolicy;
use troupe_models::{RateLimit, RateLimitedModel, ScriptedModel, ScriptedReply};
use troupe_protocol::{
    BudgetScope, ChatModel, ChatRequest, ChatStream, CompactTrigger, Event, ModelError, ModelInfo,
    SpendLimit,
};
use troupe_runtime::{AgentRequest, Team};
use troupe_tools::{NoArgs, ToolError, ToolRegistry};
use troupe_ui::{UiConfig, serve, serve_trace};

use super::support::{Runs, WRITER_ANSWERS, base_of, client, run_tool, team, token_of, words};

fn input_limit(n: u64) -> SpendLimit {
    SpendLimit {
        input_tokens: Some(n),
        ..SpendLimit::default()
    }
}

/// How a request is sent: with or without the token, from the page or from elsewhere.
#[derive(Debug, Clone, Copy)]
enum From {
    NoToken,
    OtherOrigin,
    CrossSite,
    ThePage,
}

async fn act(
    ui: &troupe_ui::UiServer,
    path: &str,
    body: &Value,
    from: From,
) -> (StatusCode, String) {
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let mut request = client().post(format!("{base}{path}")).json(body);
    request = match from {
        From::NoToken => request.header("origin", format!("http://{}", ui.addr())),
        From::OtherOrigin => request
            .header("x-troupe-token", &token)
            .header("origin", "http://evil.example"),
        From::CrossSite => request
            .header("x-troupe-token", &token)
            .header("sec-fetch-site", "cross-site"),
        From::ThePage => request
            .header("x-troupe-token", &token)
            .header("origin", format!("http://{}", ui.addr())),
    };
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.text().await.unwrap())
}

async fn snapshot(ui: &troupe_ui::UiServer) -> Value {
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    client()
        .get(format!("{base}api/snapshot?token={token}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn compact_and_raise_act_only_with_the_token_from_the_pages_origin() {
    let runs = Runs::default();
    let (team, _) = team(&runs).await;
    // `spender` spends its one-token request budget on its first call, then pauses.
    let budget = AgentBudget {
        request: input_limit(1),
        on_exceeded: OnExceeded::pause(),
        ..AgentBudget::default()
    };
    let model = Arc::new(ScriptedModel::new(
        "scripted-spender",
        [
            ScriptedReply::call("run", r#"{"command": "ls"}"#),
            ScriptedReply::text("spent"),
        ],
    ));
    // Its model is rate-limited: the view reports the limiter's requests and waits.
    let limited = RateLimitedModel::new(model, RateLimit::per_minute(Some(600), None).unwrap());
    spawn_agent(
        &team,
        AgentSpec::new("spender", Arc::new(limited.clone()))
            .tools(run_tool(&runs))
            .budget(budget.clone()),
    )
    .await
    .unwrap();
    // No budgets given: the view finds the spender's from the team.
    let config = UiConfig {
        rate_limits: vec![("spender's endpoint".to_string(), limited)],
        ..UiConfig::default()
    };
    let ui = serve(&team, config).await.unwrap();
    for i in 0..WRITER_ANSWERS {
        team.ask("writer", format!("part {i}, please"))
            .await
            .unwrap();
    }
    let mut events = team.subscribe();
    let spending = {
        let directory = team.directory().clone();
        tokio::spawn(async move {
            directory
                .ask(
                    "spender",
                    AgentRequest::from_user("list"),
                    Duration::from_secs(60),
                )
                .await
        })
    };
    loop {
        let record = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .unwrap();
        if matches!(record.event, Event::BudgetPaused { .. }) {
            break;
        }
    }
    let compact = json!({ "agent": "writer" });
    let raise = json!({ "agent": "spender", "scope": "request",
                        "limit": { "input_tokens": 1_000_000 } });
    for from in [From::NoToken, From::OtherOrigin, From::CrossSite] {
        let want = match from {
            From::NoToken => StatusCode::UNAUTHORIZED,
            _ => StatusCode::FORBIDDEN,
        };
        for (path, body) in [
            ("api/agents/compact", &compact),
            ("api/budgets/raise", &raise),
        ] {
            let (status, text) = act(&ui, path, body, from).await;
            assert_eq!(status, want, "{path} {from:?}: {text}");
        }
    }
    // Nothing was done: the spender still waits, the writer was not compacted.
    assert_eq!(budget.limit(BudgetScope::Request), Some(input_limit(1)));
    assert!(!spending.is_finished());
    let before = snapshot(&ui).await;
    assert!(before["compactions"].as_array().unwrap().is_empty());
    let spender = before["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "spender")
        .unwrap();
    assert_eq!(spender["state"], "paused_by_budget");
    while let Ok(record) = events.try_recv() {
        assert!(
            !matches!(record.event, Event::CompactionStarted { .. }),
            "a refused /compact compacted"
        );
    }

    // From the page, with the token: a limit the spend still reaches is refused, a higher one
    // lets the spender go on, and the writer is compacted.
    let too_low = json!({ "agent": "spender", "scope": "request", "limit": { "input_tokens": 1 } });
    let (status, text) = act(&ui, "api/budgets/raise", &too_low, From::ThePage).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{text}");
    let (status, text) = act(&ui, "api/budgets/raise", &raise, From::ThePage).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    let answer = tokio::time::timeout(Duration::from_secs(30), spending)
        .await
        .expect("the raised request finishes")
        .unwrap()
        .unwrap();
    assert_eq!(answer, "spent");
    let (status, text) = act(&ui, "api/agents/compact", &compact, From::ThePage).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let done: Value = serde_json::from_str(&text).unwrap();
    assert!(done["tokens_after"].as_u64().unwrap() < done["tokens_before"].as_u64().unwrap());
    let after = snapshot(&ui).await;
    assert_eq!(after["compactions"][0]["agent"], "writer");
    // An agent the team does not hold has no budget to raise; the spend shows the new limit.
    let other = json!({ "agent": "nobody", "scope": "request", "limit": { "input_tokens": 5 } });
    let (status, _) = act(&ui, "api/budgets/raise", &other, From::ThePage).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    let spend: Value = client()
        .get(format!("{base}api/spend?token={token}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let spender = spend["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == "spender")
        .unwrap();
    assert_eq!(spender["request"]["input_tokens"], 1_000_000);
    let limiter = &spend["rate_limits"][0];
    assert_eq!(limiter["name"], "spender's endpoint");
    assert_eq!(
        limiter["requests"], 2,
        "both of the spender's model calls went through it"
    );
    ui.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_finished_run_refuses_every_action() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    std::fs::write(&path, "").unwrap();
    let (ui, _) = serve_trace(&path, UiConfig::default()).await.unwrap();
    let raise = json!({ "agent": "a", "scope": "request", "limit": {} });
    for (path, body) in [
        ("api/agents/compact", json!({ "agent": "a" })),
        ("api/budgets/raise", raise),
    ] {
        let (status, text) = act(&ui, path, &body, From::ThePage).await;
        assert_eq!(status, StatusCode::CONFLICT, "{path}: {text}");
    }
    ui.shutdown().await;
}

/// A compressor that answers only when the test lets it: the automatic compaction it serves is
/// still running when the page asks for one.
struct Gated {
    model: ScriptedModel,
    gate: Arc<tokio::sync::Semaphore>,
}

#[async_trait::async_trait]
impl ChatModel for Gated {
    fn info(&self) -> ModelInfo {
        self.model.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        self.gate.acquire().await.unwrap().forget();
        self.model.chat_stream(request).await
    }
}

/// A summary in the shape the compression agent asks for.
const SUMMARY: &str = "## Goal\nRead the files.\n## Constraints & Preferences\n- none\n## Progress\n### Done\n- read files\n### In Progress\n- none\n### Blocked\n- none\n## Key Decisions\n- none\n## Next Steps\n1. continue\n## Critical Context\n- none";

#[tokio::test]
async fn compact_from_the_page_mid_request_joins_the_running_compaction_as_the_chat_does() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let compressor: Arc<dyn ChatModel> = Arc::new(Gated {
        model: ScriptedModel::new("gated-compressor", []).with_fallback(SUMMARY),
        gate: gate.clone(),
    });
    let mut reader = ToolRegistry::new();
    reader
        .register_fn("read_big", "Read a big file.", |_: NoArgs| async move {
            Ok::<_, ToolError>(words("line", 400))
        })
        .unwrap();
    let script = (0..6)
        .map(|_| ScriptedReply::call("read_big", "{}"))
        .chain([ScriptedReply::text("done")]);
    let policy = ContextPolicy {
        trigger: 0.5,
        warning: 0.45,
        target: 0.3,
        tool_output_limit_tokens: 100_000,
        ..ContextPolicy::for_window(4_000)
    };
    // The blocking road: the compaction at the trigger runs inside the request, which waits.
    let settings = CompactionSettings {
        policy: Some(policy.clone()),
        work_ahead: WorkAhead::Off,
        ..CompactionSettings::default()
    };
    let target = settings
        .policy_for(policy.context_window, None)
        .target_tokens();
    let team = Team::builder()
        .compression(CompressionConfig {
            model: CompressorModel::Fixed(compressor),
            ..CompressionConfig::new(shared_counter())
        })
        .agent(
            AgentSpec::new("reader", Arc::new(ScriptedModel::new("reader", script)))
                .tools(reader)
                .compaction(settings)
                .max_turns(10),
        )
        .start()
        .await
        .unwrap();
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let mut events = team.subscribe();
    let reading = {
        let directory = team.directory().clone();
        tokio::spawn(async move {
            directory
                .ask(
                    "reader",
                    AgentRequest::from_user("read"),
                    Duration::from_secs(60),
                )
                .await
        })
    };
    // An automatic compaction with something to do has started and waits on its compressor.
    loop {
        let record = events.recv().await.unwrap();
        if matches!(record.event, Event::CompactionStarted { tokens, .. } if tokens > target) {
            break;
        }
    }
    assert!(team.is_responding("reader"));
    let page = {
        let (base, token, origin) = (
            base_of(ui.url()),
            token_of(ui.url()),
            format!("http://{}", ui.addr()),
        );
        tokio::spawn(async move {
            let response = client()
                .post(format!("{base}api/agents/compact"))
                .header("x-troupe-token", token)
                .header("origin", origin)
                .json(&json!({ "agent": "reader" }))
                .send()
                .await
                .unwrap();
            (response.status(), response.text().await.unwrap())
        })
    };
    // Time for the page's request to arrive (the chat's /compact would be waiting on the
    // running compaction by now); it is not refused for the agent responding.
    tokio::time::sleep(Duration::from_millis(500)).await;
    gate.add_permits(1_000);
    let (status, text) = page.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{text}");
    let joined: Value = serde_json::from_str(&text).unwrap();
    // The first compaction to finish is the automatic one the page joined; the page started
    // none of its own.
    let report = loop {
        let record = events.recv().await.unwrap();
        match record.event {
            Event::CompactionFinished { report, .. } => break report,
            Event::CompactionStarted { trigger, .. } => {
                panic!("a second compaction ({trigger}) started")
            }
            _ => {}
        }
    };
    assert_eq!(joined["tokens_before"], report.tokens_before);
    assert_eq!(joined["tokens_after"], report.tokens_after);
    assert_eq!(reading.await.unwrap().unwrap(), "done");
    while let Ok(record) = events.try_recv() {
        if let Event::CompactionStarted { trigger, .. } = record.event {
            assert_ne!(trigger, CompactTrigger::Manual, "the page compacted again");
        }
    }
    // An agent the team does not hold is not found.
    let (status, text) = act(
        &ui,
        "api/agents/compact",
        &json!({ "agent": "nobody" }),
        From::ThePage,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{text}");
    ui.shutdown().await;
    team.shutdown().await;
}

/// The example's road (`Team::builder`, `UiConfig::default()`, as `cargo run --example team --
/// --ui` serves it): nobody hands the view a budget, and a paused agent is raised from the page.
#[tokio::test]
async fn a_paused_agent_of_a_team_served_with_no_budgets_is_raised_from_the_page() {
    let runs = Runs::default();
    let budget = AgentBudget {
        request: input_limit(1),
        on_exceeded: OnExceeded::pause(),
        ..AgentBudget::default()
    };
    let model = Arc::new(ScriptedModel::new(
        "scripted-spender",
        [
            ScriptedReply::call("run", r#"{"command": "ls"}"#),
            ScriptedReply::text("spent"),
        ],
    ));
    let team = Team::builder()
        .agent(
            AgentSpec::new("spender", model)
                .tools(run_tool(&runs))
                .budget(budget),
        )
        .start()
        .await
        .unwrap();
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let mut events = team.subscribe();
    let spending = {
        let directory = team.directory().clone();
        tokio::spawn(async move {
            directory
                .ask(
                    "spender",
                    AgentRequest::from_user("list"),
                    Duration::from_secs(60),
                )
                .await
        })
    };
    loop {
        let record = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .unwrap();
        if matches!(record.event, Event::BudgetPaused { .. }) {
            break;
        }
    }
    let raise = json!({ "agent": "spender", "scope": "request",
                        "limit": { "input_tokens": 1_000_000 } });
    let (status, text) = act(&ui, "api/budgets/raise", &raise, From::ThePage).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    let answer = tokio::time::timeout(Duration::from_secs(30), spending)
        .await
        .expect("the raised request finishes")
        .unwrap()
        .unwrap();
    assert_eq!(answer, "spent");
    ui.shutdown().await;
    team.shutdown().await;
}
