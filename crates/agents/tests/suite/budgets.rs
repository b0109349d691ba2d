//! Budgets (#33): a request that spends its budget mid-turn ends typed before the next model
//! call, keeping what it added; a team budget stops every agent that shares it; compaction
//! calls and scope summaries count; `/context` shows the spend.

use std::sync::Arc;

use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::spend::AgentBudget;
use troupe_agents::{
    AgentSpec, CompactionSettings, LlmAgent, shared_counter, spawn_agent, spawn_agent_with,
    spawn_compression_agent,
};
use troupe_compaction::ContextPolicy;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::Role;
use troupe_protocol::{BudgetScope, ModelPrice, SpendLimit};
use troupe_runtime::budget::TeamSpend;
use troupe_runtime::{AgentError, AskError, Team, TeamConfig};
use troupe_session::load;
use troupe_tools::ToolRegistry;

use super::support::compression::team;

fn limit_input(n: u64) -> SpendLimit {
    SpendLimit {
        input_tokens: Some(n),
        ..SpendLimit::default()
    }
}

fn exceeded(outcome: Result<String, AskError>) -> troupe_protocol::BudgetExceeded {
    match outcome {
        Err(AskError::Agent {
            error: AgentError::BudgetExceeded(hit),
            ..
        }) => hit,
        other => panic!("expected a budget exceeded, got {other:?}"),
    }
}

#[tokio::test]
async fn a_budget_spent_mid_turn_ends_the_request_typed_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let log = dir.path().join("coder.jsonl");
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("read_file", r#"{"path": "a.txt"}"#),
            ScriptedReply::text("it says alpha"),
        ],
    ));
    let price = ModelPrice::new(3.0, 15.0);
    let spec = AgentSpec::new("coder", model.clone())
        .tools(ToolRegistry::with_file_tools())
        .workspace_root(dir.path())
        .session(&log)
        // One call's prompt spends it.
        .budget(AgentBudget {
            request: limit_input(1),
            price: Some(price),
            ..AgentBudget::default()
        });
    let team = team().await;
    spawn_agent(&team, spec).await.unwrap();

    let hit = exceeded(team.ask("coder", "what does a.txt say?").await);
    assert_eq!(hit.scope, BudgetScope::Request);
    assert_eq!(hit.limit, limit_input(1));
    assert!(hit.spent.input_tokens >= 1);
    assert!(hit.spent.cost_micros > 0);
    // One model call, then the tool ran; the second call never started.
    assert_eq!(model.requests().len(), 1);
    // Nothing lost: the request, the call and its result are in the log.
    let roles: Vec<Role> = load(&log)
        .unwrap()
        .conversation
        .to_messages()
        .iter()
        .map(|m| m.role)
        .collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
    let stats = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap();
    assert_eq!(stats.spend.request, hit.spent);
    assert_eq!(stats.spend.agent, hit.spent);

    // The next request has a budget of its own: the model answers the tool result.
    assert_eq!(team.ask("coder", "go on").await.unwrap(), "it says alpha");
    team.shutdown().await;
}

#[tokio::test]
async fn a_team_budget_stops_every_agent_that_shares_it() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let shared = TeamSpend::new(SpendLimit {
        output_tokens: Some(1),
        ..SpendLimit::default()
    });
    let budget = AgentBudget {
        team: Some(shared.clone()),
        ..AgentBudget::default()
    };
    let first = Arc::new(ScriptedModel::new("m", []).with_fallback("done"));
    let second = Arc::new(ScriptedModel::new("m", []).with_fallback("done"));
    spawn_agent(&team, AgentSpec::new("a", first).budget(budget.clone()))
        .await
        .unwrap();
    spawn_agent(&team, AgentSpec::new("b", second.clone()).budget(budget))
        .await
        .unwrap();
    assert_eq!(team.ask("a", "hi").await.unwrap(), "done");
    let hit = exceeded(team.ask("b", "hi").await);
    assert_eq!(hit.scope, BudgetScope::Team);
    assert_eq!(hit.spent, shared.spent());
    assert!(second.requests().is_empty());
    let stats = team.agent::<LlmAgent>("b").context_stats().await.unwrap();
    assert_eq!(stats.spend.team, Some(shared.spent()));
    team.shutdown().await;
}

/// What the compression model answers every call with.
const SUMMARY: &str = "## Goal\n- Read the parts\n\n## Constraints & Preferences\n- (none)\n\n## Progress\n### Done\n- [x] Read them\n### In Progress\n- (none)\n### Blocked\n- (none)\n\n## Key Decisions\n- (none)\n\n## Next Steps\n1. Go on\n\n## Critical Context\n- (none)";

#[tokio::test]
async fn compaction_calls_count_against_the_agents_budget() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let summarizer = Arc::new(ScriptedModel::new("s", []).with_fallback(SUMMARY));
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(summarizer.clone());
    spawn_compression_agent(&team, config).await.unwrap();
    let model = Arc::new(ScriptedModel::new("m", []).with_fallback("noted."));
    let spec = AgentSpec::new("coder", model)
        .compaction(CompactionSettings {
            policy: Some(ContextPolicy {
                protected_recent: 2,
                ..ContextPolicy::for_window(5_000)
            }),
            auto: false,
            ..CompactionSettings::default()
        })
        .budget(AgentBudget::default());
    spawn_agent(&team, spec).await.unwrap();
    for i in 0..6 {
        let text: String = (0..30)
            .map(|n| format!("part {i} line {n}: text the agent was given\n"))
            .collect();
        team.ask("coder", text).await.unwrap();
    }
    let before = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap()
        .spend
        .agent;
    let applied = team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    assert!(
        applied.report.summarizer.calls > 0,
        "{}",
        applied.report.reason
    );
    let after = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap()
        .spend
        .agent;
    // Each of the compression model's calls counts once, with the usage the model reported
    // (the scripted model's: 4 characters a token), steering calls included.
    let tokens = |text: &str| text.len().div_ceil(4) as u64;
    let calls = summarizer.requests();
    let input: u64 = calls
        .iter()
        .map(|r| r.messages.iter().map(|m| tokens(&m.text())).sum::<u64>())
        .sum();
    assert!(!calls.is_empty());
    assert_eq!(after.input_tokens - before.input_tokens, input);
    assert_eq!(
        after.output_tokens - before.output_tokens,
        calls.len() as u64 * tokens(SUMMARY)
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_scope_summary_counts_against_the_agents_budget() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_compression_agent(&team, CompressionConfig::new(shared_counter()))
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new("m", []).with_fallback("noted."));
    let spec = AgentSpec::new("coder", model).budget(AgentBudget::default());
    spawn_agent(&team, spec).await.unwrap();
    team.agent::<LlmAgent>("coder")
        .open_scope("loop")
        .await
        .unwrap();
    team.ask("coder", "read the files and fix the parser")
        .await
        .unwrap();
    let summarizer = Arc::new(ScriptedModel::new("s", []).with_fallback("fixed the parser"));
    let before = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap()
        .spend
        .agent;
    let summary = team
        .agent::<LlmAgent>("coder")
        .close_scope(None, Some(summarizer.clone()))
        .await
        .unwrap();
    assert_eq!(summary.as_deref(), Some("fixed the parser"));
    let after = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap()
        .spend
        .agent;
    // The one summary call counts once, with the usage the model reported (the scripted
    // model's: 4 characters a token).
    let tokens = |text: &str| text.len().div_ceil(4) as u64;
    let calls = summarizer.requests();
    assert_eq!(calls.len(), 1);
    let input: u64 = calls[0].messages.iter().map(|m| tokens(&m.text())).sum();
    assert_eq!(after.input_tokens - before.input_tokens, input);
    assert_eq!(
        after.output_tokens - before.output_tokens,
        tokens("fixed the parser")
    );
    team.shutdown().await;
}

/// An agent spawned through a team's spawner (as a standby node's takeover spawns it, holding no
/// `Team`) has its budget registered with the team as one spawned through the team.
#[tokio::test]
async fn an_agent_spawned_through_the_teams_spawner_has_its_budget_in_the_team() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let model = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("ok")]));
    let spec = AgentSpec::new("coder", model).budget(AgentBudget {
        request: limit_input(7),
        ..AgentBudget::default()
    });
    spawn_agent_with(&team.spawner(), spec).await.unwrap();
    let budget = team.agent::<LlmAgent>("coder").budget();
    assert_eq!(budget.map(|b| b.request), Some(limit_input(7)));
    team.shutdown().await;
}
