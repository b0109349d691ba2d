//! A request's trace as a waterfall, served: the asking agent's request, its model and tool
//! calls, and the request of the agent it asked nested under the `ask_agent` call, each with its
//! times and tokens.

use std::sync::Arc;

use serde_json::Value;
use troupe_agents::{AgentSpec, TeamBuilderExt as _};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_ui::{UiConfig, serve};

use super::support::{base_of, client, token_of};

async fn get(ui: &troupe_ui::UiServer, path: &str) -> Value {
    let (base, token) = (base_of(ui.url()), token_of(ui.url()));
    client()
        .get(format!("{base}{path}?token={token}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_requests_waterfall_reaches_into_the_agent_it_asked() {
    let lead = Arc::new(ScriptedModel::new(
        "scripted-lead",
        [
            ScriptedReply::call(
                "ask_agent",
                r#"{"agent": "helper", "message": "what is 2 + 2?"}"#,
            ),
            ScriptedReply::text("helper says 4"),
        ],
    ));
    let helper = Arc::new(ScriptedModel::new(
        "scripted-helper",
        [ScriptedReply::text("4")],
    ));
    let team = troupe_runtime::Team::builder()
        .agent(AgentSpec::new("lead", lead).team_messaging(true))
        .agent(AgentSpec::new("helper", helper))
        .start()
        .await
        .unwrap();
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    assert_eq!(
        team.ask("lead", "ask the helper").await.unwrap(),
        "helper says 4"
    );
    // The view folds the request's last event soon after the answer: wait for it.
    let finished = async {
        loop {
            let lines = get(&ui, "api/traces").await;
            let done = lines
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["agent"] == "lead" && l["open"] == false)
                .cloned();
            if let Some(line) = done {
                return line;
            }
            tokio::task::yield_now().await;
        }
    };
    let line = tokio::time::timeout(std::time::Duration::from_secs(30), finished)
        .await
        .expect("the lead's trace is folded, its request closed");
    assert_eq!(line["agents"], serde_json::json!(["lead", "helper"]));
    let trace = get(&ui, &format!("api/traces/{}", line["id"].as_str().unwrap())).await;
    let bars: Vec<(String, String, String, u64)> = trace["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["kind"].as_str().unwrap().to_string(),
                s["agent"].as_str().unwrap().to_string(),
                s["name"].as_str().unwrap().to_string(),
                s["depth"].as_u64().unwrap(),
            )
        })
        .collect();
    let bar = |kind: &str, agent: &str, name: &str, depth: u64| {
        (kind.to_string(), agent.to_string(), name.to_string(), depth)
    };
    assert_eq!(
        bars,
        [
            bar("request", "lead", "lead", 0),
            bar("model_call", "lead", "scripted-lead", 1),
            bar("tool_call", "lead", "ask_agent", 1),
            bar("request", "helper", "helper", 2),
            bar("model_call", "helper", "scripted-helper", 3),
            bar("model_call", "lead", "scripted-lead", 1),
        ]
    );
    for span in trace["spans"].as_array().unwrap() {
        let (start, end) = (span["start_ms"].as_u64().unwrap(), span["end_ms"].as_u64());
        assert!(end.is_some_and(|end| end >= start), "{span}");
        if span["kind"] == "model_call" {
            assert!(span["input_tokens"].as_u64().unwrap() > 0, "{span}");
        }
    }
    ui.shutdown().await;
    team.shutdown().await;
}
