//! Shared rate limits (#33): eight agents calling one endpoint through one
//! [`RateLimitedModel`] against a server that enforces its limit, and a compression agent
//! waiting in the same line as the agent it compacts. On tokio's paused time, so
//! minutes of waiting take none and every instant below is the virtual clock's.

use std::sync::Arc;
use std::time::Duration;

use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::{
    AgentSpec, CompactionSettings, LlmAgent, shared_counter, spawn_agent, spawn_compression_agent,
};
use troupe_compaction::ContextPolicy;
use troupe_models::{
    OpenAiConfig, OpenAiModel, RateLimit, RateLimitedModel, RetryPolicy, ScriptedModel,
};
use troupe_protocol::ChatModel;
use troupe_runtime::{Team, TeamConfig};

use super::support::compression::team;
use super::support::rate_limit_server::LimitServer;

const AGENTS: usize = 8;

/// The endpoint at `server`, its calls under `limit`; Retry-After honoured up to two minutes.
fn limited(server: &LimitServer, limit: RateLimit) -> RateLimitedModel {
    let config = OpenAiConfig::new(&server.base_url, "gpt-test")
        .with_api_key("sk-test")
        .with_retry(RetryPolicy {
            max_retries: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(120),
        });
    RateLimitedModel::new(Arc::new(OpenAiModel::new(config).unwrap()), limit)
}

/// A team of [`AGENTS`] agents, `agent0` …, all on `model`.
async fn agents(model: &RateLimitedModel) -> Arc<Team> {
    let team = Arc::new(team().await);
    let shared: Arc<dyn ChatModel> = Arc::new(model.clone());
    for i in 0..AGENTS {
        spawn_agent(&team, AgentSpec::new(format!("agent{i}"), shared.clone()))
            .await
            .unwrap();
    }
    team
}

/// Ask `agent` `question` in a task of its own; the answer comes back through the handle.
fn ask(team: &Arc<Team>, agent: usize, question: String) -> tokio::task::JoinHandle<String> {
    let team = team.clone();
    tokio::spawn(async move {
        team.ask(&format!("agent{agent}"), &question)
            .await
            .unwrap_or_else(|e| panic!("agent{agent}: {e}"))
    })
}

/// Shut the team down once every task that asked it is done.
async fn stop(team: Arc<Team>) {
    match Arc::try_unwrap(team) {
        Ok(team) => team.shutdown().await,
        Err(_) => panic!("a task still holds the team"),
    }
}

/// Let the virtual clock run until `done` holds (each look a virtual second apart).
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..600 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("never happened");
}

#[tokio::test(start_paused = true)]
async fn eight_agents_sharing_a_limit_get_no_429_after_the_first() {
    let server = LimitServer::start(4).await;
    // Another client of the key used this minute up: our first request hears 429.
    server.used_by_others(4);
    let model = limited(&server, RateLimit::per_minute(Some(4), None).unwrap());
    let team = agents(&model).await;

    // Everyone starts (agent0 once its first answer came) while the server's Retry-After
    // holds, and asks three times in all.
    let mut all = Vec::new();
    for agent in 0..AGENTS {
        let team = team.clone();
        let mut first = (agent == 0).then(|| ask(&team, 0, "agent0 question 0".into()));
        all.push(tokio::spawn(async move {
            for round in 0..3 {
                match first.take() {
                    Some(answer) => answer.await.unwrap(),
                    None => ask(&team, agent, format!("agent{agent} question {round}"))
                        .await
                        .unwrap(),
                };
            }
        }));
        if agent == 0 {
            until(|| server.refused() == 1).await;
        }
    }
    for handle in all {
        handle.await.unwrap();
    }

    let arrivals = server.arrivals();
    assert_eq!(server.refused(), 1, "{arrivals:#?}");
    assert_eq!(arrivals.iter().filter(|a| !a.refused).count(), 3 * AGENTS);
    assert_eq!(server.early(), 0, "nobody went before the Retry-After");
    let stats = model.stats();
    assert_eq!(stats.holds, 1);
    // 24 answered and the one refused.
    assert_eq!(stats.requests, 3 * AGENTS as u64 + 1);
    stop(team).await;
}

#[tokio::test(start_paused = true)]
async fn requests_per_minute_pace_the_agents_in_the_order_they_asked() {
    let server = LimitServer::start(2).await;
    let model = limited(&server, RateLimit::per_minute(Some(2), None).unwrap());
    let team = agents(&model).await;

    // One agent a second asks once: two a minute go, the rest wait in the order they came.
    let mut handles = Vec::new();
    for agent in 0..AGENTS {
        handles.push(ask(&team, agent, format!("agent{agent}")));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for (agent, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.await.unwrap(), format!("answered: agent{agent}"));
    }

    let arrivals = server.arrivals();
    assert_eq!(server.refused(), 0, "{arrivals:#?}");
    let order: Vec<&str> = arrivals.iter().map(|a| a.asked.as_str()).collect();
    let expected: Vec<String> = (0..AGENTS).map(|i| format!("agent{i}")).collect();
    assert_eq!(order, expected, "served in the order asked");
    // Each waited for the ones before it and no longer: a minute per two ahead of it.
    let seconds: Vec<u64> = arrivals.iter().map(|a| a.at.as_secs()).collect();
    assert_eq!(seconds, [0, 1, 60, 61, 120, 121, 180, 181]);
    let stats = model.stats();
    assert_eq!((stats.requests, stats.waited), (8, 6));
    stop(team).await;
}

#[tokio::test(start_paused = true)]
async fn a_large_request_is_not_starved_by_small_ones_behind_it() {
    let server = LimitServer::start(100).await;
    // Each request reserves its prompt (a few tokens here) and its output cap, and settles to
    // the 49 tokens the server reports using.
    let model = limited(&server, RateLimit::per_minute(None, Some(1_000)).unwrap());
    let shared: Arc<dyn ChatModel> = Arc::new(model.clone());
    let team = Arc::new(team().await);
    for i in 0..AGENTS {
        // agent0 asks for a long answer: 900 tokens reserved; the others 200.
        let cap = if i == 0 { 900 } else { 200 };
        let spec = AgentSpec::new(format!("agent{i}"), shared.clone()).max_tokens(cap);
        spawn_agent(&team, spec).await.unwrap();
    }

    // Four small ones fill most of the minute; the large one comes next and waits for room;
    // three more small ones come after it, each small enough for the room there is.
    let mut handles = Vec::new();
    for agent in [1, 2, 3, 4, 0, 5, 6, 7] {
        handles.push((agent, ask(&team, agent, format!("agent{agent}"))));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for (agent, handle) in handles {
        assert_eq!(handle.await.unwrap(), format!("answered: agent{agent}"));
    }

    let arrivals = server.arrivals();
    let order: Vec<&str> = arrivals.iter().map(|a| a.asked.as_str()).collect();
    assert_eq!(
        order,
        [
            "agent1", "agent2", "agent3", "agent4", "agent0", "agent5", "agent6", "agent7"
        ],
        "the small ones behind it never jumped the line"
    );
    // It waited for the first ones' minute to pass, and the rest went right after it: its
    // reservation settled to what it used.
    let went = arrivals[4].at;
    assert!(went >= Duration::from_secs(60), "{arrivals:#?}");
    assert!(arrivals[5..].iter().all(|a| a.at == went), "{arrivals:#?}");
    stop(team).await;
}

#[tokio::test(start_paused = true)]
async fn a_429_storm_slows_everyone_then_recovers() {
    let server = LimitServer::start(100).await;
    // No limit of its own: the model only shares what the server says.
    let model = limited(&server, RateLimit::default());
    let team = agents(&model).await;
    server.storm(3, 10);

    let mut handles = vec![ask(&team, 0, "agent0".into())];
    until(|| server.refused() == 1).await;
    // The others ask, one a second, while the first 429's ten seconds run.
    for agent in 1..AGENTS {
        handles.push(ask(&team, agent, format!("agent{agent}")));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for (agent, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.await.unwrap(), format!("answered: agent{agent}"));
    }

    let arrivals = server.arrivals();
    // The storm's three 429s, and nothing sent into any of them.
    assert_eq!(server.refused(), 3, "{arrivals:#?}");
    assert_eq!(server.early(), 0, "{arrivals:#?}");
    // Nobody but the first went before the first Retry-After ended.
    assert!(
        arrivals[1..]
            .iter()
            .all(|a| a.at >= Duration::from_secs(10)),
        "{arrivals:#?}"
    );
    assert_eq!(arrivals.iter().filter(|a| !a.refused).count(), AGENTS);
    assert_eq!(model.stats().holds, 3);
    stop(team).await;
}

/// A summary in the shape compaction checks for.
const SUMMARY: &str = "## Goal\n- Read the parts\n\n## Constraints & Preferences\n- (none)\n\n## Progress\n### Done\n- [x] Read them\n### In Progress\n- (none)\n### Blocked\n- (none)\n\n## Key Decisions\n- (none)\n\n## Next Steps\n1. Go on\n\n## Critical Context\n- (none)";

#[tokio::test(start_paused = true)]
async fn the_compression_agents_calls_wait_in_the_same_line() {
    let scripted = Arc::new(ScriptedModel::new("m", []).with_fallback(SUMMARY));
    let limited = RateLimitedModel::new(
        scripted.clone(),
        RateLimit::per_minute(Some(6), None).unwrap(),
    );
    let shared: Arc<dyn ChatModel> = Arc::new(limited.clone());
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(shared.clone());
    spawn_compression_agent(&team, config).await.unwrap();
    let spec = AgentSpec::new("coder", shared).compaction(CompactionSettings {
        policy: Some(ContextPolicy {
            protected_recent: 2,
            ..ContextPolicy::for_window(5_000)
        }),
        auto: false,
        ..CompactionSettings::default()
    });
    spawn_agent(&team, spec).await.unwrap();
    // The agent's six calls use the minute up.
    for i in 0..6 {
        let text: String = (0..30)
            .map(|n| format!("part {i} line {n}: text the agent was given\n"))
            .collect();
        team.ask("coder", text).await.unwrap();
    }
    assert_eq!(limited.stats().waited, 0);

    let started = tokio::time::Instant::now();
    let applied = team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    let calls = applied.report.summarizer.calls as u64;
    assert!(calls > 0, "{}", applied.report.reason);
    let stats = limited.stats();
    // Every call the model got, the agent's and the compression agent's, went through the one
    // limit.
    let sent = scripted.requests();
    assert_eq!(stats.requests, sent.len() as u64);
    let compressor = sent
        .iter()
        .filter(|r| r.agent.as_deref() != Some("coder"))
        .count();
    assert!(compressor as u64 >= calls, "{stats:?}");
    // Its calls waited for the agent's minute to pass.
    assert!(stats.waited >= 1, "{stats:?}");
    assert!(started.elapsed() >= Duration::from_secs(60), "{stats:?}");
    team.shutdown().await;
}
