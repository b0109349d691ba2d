//! Metrics at the collector: tokens and durations equal to the trace, compactions and the tokens
//! they freed, restarts.

use super::*;

/// `OTEL_METRICS_EXPORTER=none` keeps metrics home; spans still go out.
#[test]
fn otel_metrics_exporter_none_exports_spans_only() {
    let collector = start_collector();
    run_init_child(&collector, &[("OTEL_METRICS_EXPORTER", "none")]);
    assert_eq!(collector.spans().len(), 2);
    assert!(collector.metrics.lock().unwrap().is_empty());
}

/// A scripted team run exports, per agent and model, token usage equal to the token counts of
/// the run's trace file, and one duration point per model call and per tool call.
#[test]
fn a_team_run_exports_token_and_duration_metrics_matching_its_trace() {
    let collector = start_collector();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("run.jsonl");
    let (otlp, export) = otlp_layer::<Registry>(&collector.config_with_metrics())
        .unwrap()
        .unwrap();
    let file_config = TelemetryConfig {
        trace_file: Some(trace.clone()),
        ..TelemetryConfig::default()
    };
    let (file_layer, file) = troupe::telemetry::trace_file_layer::<Registry>(&file_config)
        .unwrap()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(vec![otlp, file_layer]);
    tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run_scripted_team())
    });
    file.flush();
    export.shutdown().unwrap();

    let metrics = collector.metrics();
    let chats = trace_file_spans(&trace, "chat");
    assert_eq!(chats.len(), 4);
    // What the trace file says, per (agent, model): calls and tokens in and out.
    let mut expected: std::collections::BTreeMap<(String, String), (u64, u64, u64)> =
        Default::default();
    for chat in &chats {
        let a = &chat["attributes"];
        let key = (
            a["gen_ai.agent.name"].as_str().unwrap().to_string(),
            a["gen_ai.request.model"].as_str().unwrap().to_string(),
        );
        let entry = expected.entry(key).or_default();
        entry.0 += 1;
        entry.1 += a["gen_ai.usage.input_tokens"].as_u64().unwrap();
        entry.2 += a["gen_ai.usage.output_tokens"].as_u64().unwrap();
    }
    assert_eq!(expected.len(), 3, "{expected:?}");
    for ((agent, model), (calls, input, output)) in expected {
        let base = [
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.agent.name", agent.as_str()),
            ("gen_ai.request.model", model.as_str()),
        ];
        for (token_type, tokens) in [("input", input), ("output", output)] {
            let mut attributes = base.to_vec();
            attributes.push(("gen_ai.token.type", token_type));
            let key = ("gen_ai.client.token.usage".to_string(), pairs(&attributes));
            assert_eq!(
                metrics.get(&key),
                Some(&Point::Histogram {
                    count: calls,
                    sum: tokens as f64
                }),
                "{key:?} in {metrics:#?}"
            );
        }
        let key = ("gen_ai.client.operation.duration".to_string(), pairs(&base));
        assert!(
            matches!(metrics.get(&key), Some(Point::Histogram { count, .. }) if *count == calls),
            "{key:?} in {metrics:#?}"
        );
    }
    // One duration point per tool call: the coordinator's two `ask_agent` calls.
    let tools = trace_file_spans(&trace, "execute_tool");
    assert_eq!(tools.len(), 2);
    let key = (
        "gen_ai.client.operation.duration".to_string(),
        pairs(&[
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.agent.name", "coordinator"),
            ("gen_ai.tool.name", "ask_agent"),
        ]),
    );
    assert!(
        matches!(metrics.get(&key), Some(Point::Histogram { count: 2, .. })),
        "{key:?} in {metrics:#?}"
    );
}

/// `troupe compact` with `OTEL_EXPORTER_OTLP_ENDPOINT` set counts one manual compaction and the
/// tokens it freed, as its trace file reports them.
#[test]
fn a_compaction_exports_its_count_and_the_tokens_it_freed() {
    let collector = start_collector();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("t.json");
    let mut messages = vec![serde_json::json!({"role": "system", "content": "Be brief."})];
    for i in 0..40 {
        messages.push(serde_json::json!({"role": "user", "content": format!(
            "Module m{i}: write the parser, keep the public API, and list the tests you changed."
        )}));
        messages.push(serde_json::json!({"role": "assistant", "content": format!(
            "Wrote the parser for module m{i} with a hand-written lexer; tests/parser.rs covers it."
        )}));
    }
    std::fs::write(&input, serde_json::Value::Array(messages).to_string()).unwrap();
    let (out, trace) = (dir.path().join("o.json"), dir.path().join("t.jsonl"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command
        .args(["compact", input.to_str().unwrap(), "--window", "2000"])
        .args(["--model", "none", "--out", out.to_str().unwrap()])
        .env("TROUPE_TRACE", &trace)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.base);
    for var in [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "TROUPE_TRACE_FILTER",
        "RUST_LOG",
    ] {
        command.env_remove(var);
    }
    let run = command.output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );

    let compactions = trace_file_spans(&trace, "compaction");
    assert_eq!(compactions.len(), 1);
    let attrs = &compactions[0]["attributes"];
    let before = attrs["troupe.compaction.tokens_before"].as_u64().unwrap();
    let after = attrs["troupe.compaction.tokens_after"].as_u64().unwrap();
    assert!(before > after, "{attrs}");
    let agent = attrs["gen_ai.agent.name"].as_str().unwrap();
    let by = pairs(&[("gen_ai.agent.name", agent), ("troupe.trigger", "manual")]);

    let metrics = collector.metrics();
    assert_eq!(
        metrics.get(&("troupe.compactions".to_string(), by.clone())),
        Some(&Point::Sum(1)),
        "{metrics:#?}"
    );
    assert_eq!(
        metrics.get(&("troupe.compaction.tokens_freed".to_string(), by)),
        Some(&Point::Sum(i64::try_from(before - after).unwrap())),
        "{metrics:#?}"
    );
}

/// An agent that fails fatally (so its supervisor restarts it) when told `fail`.
struct Fragile;

#[async_trait::async_trait]
impl AgentBehavior for Fragile {
    async fn handle(
        &mut self,
        request: AgentRequest,
        _: &AgentContext,
    ) -> Result<String, AgentError> {
        match request.text.as_str() {
            "fail" => Err(AgentError::Fatal("told to fail".into())),
            _ => Ok("fine".into()),
        }
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }
}

/// Builds [`Fragile`]; unless `rebuildable`, only the first time, so a restart fails.
fn fragile(rebuildable: bool) -> BehaviorFactory {
    Arc::new(move |checkpoint: Option<Checkpoint>| {
        if checkpoint.is_some() && !rebuildable {
            return Err(AgentError::Fatal("cannot be rebuilt".into()));
        }
        Ok(Box::new(Fragile) as Box<dyn AgentBehavior>)
    })
}

/// The supervisor's restarts are counted per agent, and only when the agent runs again.
#[test]
fn restarts_are_counted_per_agent_when_the_agent_runs_again() {
    let collector = start_collector();
    let (layer, export) = otlp_layer::<Registry>(&collector.config_with_metrics())
        .unwrap()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let team = Team::start(TeamConfig::default()).await.unwrap();
                team.spawn("namer", fragile(true)).await.unwrap();
                team.spawn("copywriter", fragile(false)).await.unwrap();
                for _ in 0..2 {
                    team.ask("namer", "fail").await.unwrap_err();
                }
                assert_eq!(team.ask("namer", "hello").await.unwrap(), "fine");
                team.ask("copywriter", "fail").await.unwrap_err();
                team.ask("copywriter", "hello").await.unwrap_err();
                team.shutdown().await;
            });
    });
    export.shutdown().unwrap();

    let restarts: Vec<(StreamKey, Point)> = collector
        .metrics()
        .into_iter()
        .filter(|((name, _), _)| name == "troupe.agent.restarts")
        .collect();
    assert_eq!(
        restarts,
        [(
            (
                "troupe.agent.restarts".to_string(),
                pairs(&[("gen_ai.agent.name", "namer")])
            ),
            Point::Sum(2)
        )]
    );
}
