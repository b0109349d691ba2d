//! Spend and shared rate limits at the collector: what a priced agent's calls cost (the number
//! its budget counted, from the `chat` spans), and how long calls waited for the rate limit
//! their endpoint shares.

use super::*;
use troupe::{AgentSpec, LlmAgent};

use troupe::agents::spend::AgentBudget;
use troupe::models::{RateLimit, RateLimitedModel, ScriptedModel};
use troupe::prelude::TeamBuilderExt;
use troupe::protocol::ModelPrice;

/// Two agents share one endpoint limited to a request a minute: the second call waits out the
/// minute (paused time), and the wait histogram has both calls, by model. Only the agent whose
/// model has a price has a cost, and it is what its budget meter recorded.
#[test]
fn spend_and_rate_limit_waits_are_exported_per_agent_and_model() {
    let collector = start_collector();
    let (layer, export) = otlp_layer::<Registry>(&collector.config_with_metrics())
        .unwrap()
        .unwrap();
    let spent =
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap()
                .block_on(async {
                    let inner = Arc::new(ScriptedModel::new("limited", []).with_fallback("Oslo."));
                    let model = Arc::new(RateLimitedModel::new(
                        inner,
                        RateLimit::per_minute(Some(1), None).unwrap(),
                    ));
                    let budget = AgentBudget {
                        price: Some(ModelPrice::new(2.0, 10.0)),
                        ..AgentBudget::default()
                    };
                    let team = Team::builder()
                        .agent(AgentSpec::new("priced", model.clone()).budget(budget))
                        .agent(AgentSpec::new("plain", model.clone()))
                        .start()
                        .await
                        .unwrap();
                    team.ask("priced", "Capital of Norway?").await.unwrap();
                    let started = tokio::time::Instant::now();
                    team.ask("plain", "And of Sweden?").await.unwrap();
                    assert!(started.elapsed() >= std::time::Duration::from_secs(59));
                    assert_eq!(model.stats().waited, 1);
                    let spent = team
                        .agent::<LlmAgent>("priced")
                        .context_stats()
                        .await
                        .unwrap()
                        .spend
                        .agent;
                    team.shutdown().await;
                    spent
                })
        });
    export.shutdown().unwrap();

    let metrics = collector.metrics();
    assert!(spent.cost_micros > 0, "{spent:?}");
    let by = [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.agent.name", "priced"),
        ("gen_ai.request.model", "limited"),
    ];
    assert_eq!(
        metrics.get(&("troupe.spend.cost".to_string(), pairs(&by))),
        Some(&Point::Sum(spent.cost_micros as i64)),
        "{metrics:#?}"
    );
    // No price, no cost: not a cost of 0.
    assert_eq!(
        metrics
            .keys()
            .filter(|(name, _)| name == "troupe.spend.cost")
            .count(),
        1,
        "{metrics:#?}"
    );
    let wait = metrics.get(&(
        "troupe.rate_limit.wait".to_string(),
        pairs(&[("gen_ai.request.model", "limited")]),
    ));
    let Some(&Point::Histogram { count, sum }) = wait else {
        panic!("no wait histogram in {metrics:#?}");
    };
    // Both calls, the first without waiting, the second a minute (less the time the first
    // took, which paused time makes none).
    assert_eq!(count, 2);
    assert!((59.0..=60.5).contains(&sum), "{sum}");
    // No `Retry-After` was heard: no holds.
    assert!(
        !metrics
            .keys()
            .any(|(name, _)| name == "troupe.rate_limit.holds"),
        "{metrics:#?}"
    );
}

/// An OpenAI-compatible `/v1/chat/completions` that answers its first request `429` with
/// `Retry-After: 5` and every later one with a completion.
async fn refusing_once() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let served = Mutex::new(0usize);
    serve_http(listener, move |_, _, _| {
        let mut served = served.lock().unwrap();
        *served += 1;
        let (status, extra, body) = if *served == 1 {
            let body = serde_json::json!({"error": {
                "message": "Rate limit reached for requests",
                "type": "requests",
                "code": "rate_limit_exceeded"
            }});
            ("429 Too Many Requests", "retry-after: 5\r\n", body)
        } else {
            let body = serde_json::json!({
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": "gpt-test",
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": "Oslo."},
                    "finish_reason": "stop"
                }],
                "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
            });
            ("200 OK", "", body)
        };
        let body = body.to_string();
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
            body.len()
        )
    });
    base
}

/// A `429` with `Retry-After` heard under a shared limit holds the endpoint: one hold, by
/// model, on the call's `chat` span and so in the counter.
#[test]
fn a_retry_after_hold_is_counted_by_model() {
    use troupe::models::{OpenAiConfig, OpenAiModel, RetryPolicy};

    let collector = start_collector();
    let (layer, export) = otlp_layer::<Registry>(&collector.config_with_metrics())
        .unwrap()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(async {
                let base = refusing_once().await;
                let config = OpenAiConfig::new(&base, "gpt-test")
                    .with_api_key("sk-test")
                    .with_retry(RetryPolicy {
                        max_retries: 2,
                        initial_backoff: std::time::Duration::from_millis(100),
                        max_backoff: std::time::Duration::from_secs(1),
                        max_retry_after: std::time::Duration::from_secs(60),
                    });
                let model = Arc::new(RateLimitedModel::new(
                    Arc::new(OpenAiModel::new(config).unwrap()),
                    RateLimit::default(),
                ));
                let team = Team::builder()
                    .agent(AgentSpec::new("geo", model.clone()))
                    .start()
                    .await
                    .unwrap();
                assert_eq!(
                    team.ask("geo", "Capital of Norway?").await.unwrap(),
                    "Oslo."
                );
                assert_eq!(model.stats().holds, 1);
                team.shutdown().await;
            })
    });
    export.shutdown().unwrap();

    let metrics = collector.metrics();
    assert_eq!(
        metrics.get(&(
            "troupe.rate_limit.holds".to_string(),
            pairs(&[("gen_ai.request.model", "gpt-test")]),
        )),
        Some(&Point::Sum(1)),
        "{metrics:#?}"
    );
}

/// A priced agent's `/compact`: the summarizer's calls are metered like the agent's own, so
/// their cost is in `troupe.spend.cost` (as the compression agent's, by the summarizer model)
/// and the counter's total is exactly what the agent's budget spent — counted once.
#[test]
fn a_compactions_summarizer_cost_is_in_the_spend_metric_and_the_budget_once() {
    use troupe::agents::compression::{CompressionConfig, CompressorModel};
    use troupe::agents::{
        CompactionSettings, LlmAgent, shared_counter, spawn_agent, spawn_compression_agent,
    };
    use troupe::compaction::ContextPolicy;

    let collector = start_collector();
    let (layer, export) = otlp_layer::<Registry>(&collector.config_with_metrics())
        .unwrap()
        .unwrap();
    let (spent, summarized) =
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let team = Team::start(TeamConfig::default()).await.unwrap();
                    let summarizer = Arc::new(ScriptedModel::new("summarizer", []).with_fallback(
                        "## Goal\n- Read the parts\n\n## Constraints & Preferences\n- (none)\n\n\
                         ## Progress\n### Done\n- [x] Read them\n### In Progress\n- (none)\n\
                         ### Blocked\n- (none)\n\n## Key Decisions\n- (none)\n\n\
                         ## Next Steps\n1. Go on\n\n## Critical Context\n- (none)",
                    ));
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
                        .budget(AgentBudget {
                            price: Some(ModelPrice::new(2.0, 10.0)),
                            ..AgentBudget::default()
                        });
                    spawn_agent(&team, spec).await.unwrap();
                    for i in 0..6 {
                        let text: String = (0..30)
                            .map(|n| format!("part {i} line {n}: text the agent was given\n"))
                            .collect();
                        team.ask("coder", text).await.unwrap();
                    }
                    let applied = team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
                    assert!(
                        applied.report.summarizer.calls > 0,
                        "{}",
                        applied.report.reason
                    );
                    let spent = team
                        .agent::<LlmAgent>("coder")
                        .context_stats()
                        .await
                        .unwrap()
                        .spend
                        .agent;
                    team.shutdown().await;
                    (spent, summarizer.requests().len())
                })
        });
    export.shutdown().unwrap();

    let metrics = collector.metrics();
    assert!(summarized > 0);
    let compaction = metrics.get(&(
        "troupe.spend.cost".to_string(),
        pairs(&[
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.agent.name", "compressor"),
            ("gen_ai.request.model", "summarizer"),
        ]),
    ));
    let Some(&Point::Sum(compaction)) = compaction else {
        panic!("no summarizer cost in {metrics:#?}");
    };
    assert!(compaction > 0);
    let total: i64 = metrics
        .iter()
        .filter(|((name, _), _)| name == "troupe.spend.cost")
        .map(|(_, point)| match point {
            Point::Sum(n) => *n,
            Point::Histogram { .. } => panic!("troupe.spend.cost is a counter"),
        })
        .sum();
    // The agent's own calls and the summarizer's, and nothing counted twice.
    assert_eq!(total, spent.cost_micros as i64, "{metrics:#?}");
    assert!(total > compaction, "{metrics:#?}");
}
