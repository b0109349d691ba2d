//! OTLP export (feature `otlp`): spans shaped like the runtime's go to a fake OTLP/HTTP collector,
//! which decodes them with the real OTLP protobuf schema; secrets and (by default) message content
//! must not reach it. Metrics go to the same collector's `POST /v1/metrics`.

use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::{AnyValue as AnyValueMsg, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point};
use opentelemetry_proto::tonic::trace::v1::{Span, status::StatusCode as SpanStatus};
use prost::Message;
use tracing_subscriber::Registry;
use tracing_subscriber::layer::SubscriberExt;
use troupe::runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint, Team,
    TeamConfig,
};
use troupe::telemetry::{OtlpExport, TelemetryConfig, TelemetryError, otlp_layer};

use super::support::run_scripted_team;

/// The runtime's trace id, as `invoke_agent` records it in `troupe.trace_id`.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const API_KEY: &str = "sk-live-SECRET1234567890";
const BEARER_TOKEN: &str = "sk-abc123def456ghi789";
const CONTENT: &str = "SOURDOUGH-PROMPT-CONTENT";
/// Set in the child process of [`init_from_env_exports_when_the_guard_drops`].
const CHILD_ENV: &str = "TROUPE_TEST_OTLP_CHILD";

/// What the fake collector received: one (content type, body) per request.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A fake OTLP/HTTP collector on 127.0.0.1, serving `POST /v1/traces` and `POST /v1/metrics`
/// until dropped.
struct Collector {
    _runtime: tokio::runtime::Runtime,
    base: String,
    received: Received,
    metrics: Received,
}

async fn accept(State(received): State<Received>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    received.lock().unwrap().push((content_type, body.to_vec()));
    // An empty body is an empty `ExportTraceServiceResponse`: full success.
    StatusCode::OK
}

fn start_collector() -> Collector {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let received = Received::default();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let metrics = Received::default();
    let app = Router::new()
        .route("/v1/traces", post(accept))
        .with_state(Arc::clone(&received))
        .merge(
            Router::new()
                .route("/v1/metrics", post(accept))
                .with_state(Arc::clone(&metrics)),
        );
    runtime.spawn(async move { axum::serve(listener, app).await });
    Collector {
        _runtime: runtime,
        base,
        received,
        metrics,
    }
}

/// One metric stream as last exported: its name and its attributes, sorted.
type StreamKey = (String, Vec<(String, String)>);

/// A stream's latest cumulative value: a counter's sum, or a histogram's count and sum.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Point {
    Sum(i64),
    Histogram { count: u64, sum: f64 },
}

impl Collector {
    fn config(&self, record_content: bool) -> TelemetryConfig {
        TelemetryConfig {
            otlp_endpoint: Some(format!("{}/v1/traces", self.base)),
            record_content,
            ..TelemetryConfig::default()
        }
    }

    /// The same endpoints with metrics exported too.
    fn config_with_metrics(&self) -> TelemetryConfig {
        TelemetryConfig {
            otlp_metrics_endpoint: Some(format!("{}/v1/metrics", self.base)),
            ..self.config(false)
        }
    }

    /// Every metric stream received, at its latest (cumulative) value.
    fn metrics(&self) -> std::collections::BTreeMap<StreamKey, Point> {
        let mut streams = std::collections::BTreeMap::new();
        for (content_type, body) in self.metrics.lock().unwrap().clone() {
            assert_eq!(content_type, "application/x-protobuf");
            let request = ExportMetricsServiceRequest::decode(body.as_slice()).unwrap();
            for metric in request
                .resource_metrics
                .into_iter()
                .flat_map(|r| r.scope_metrics)
                .flat_map(|s| s.metrics)
            {
                let key = |attributes: &[KeyValue]| {
                    let mut pairs: Vec<(String, String)> = attributes
                        .iter()
                        .map(|kv| {
                            let value = kv.value.clone().and_then(|v| v.value);
                            (kv.key.clone(), value.and_then(|v| str_value(&v)).unwrap())
                        })
                        .collect();
                    pairs.sort();
                    (metric.name.clone(), pairs)
                };
                match &metric.data {
                    Some(Data::Sum(sum)) => {
                        for p in &sum.data_points {
                            let Some(number_data_point::Value::AsInt(n)) = p.value else {
                                panic!("{} is not an integer sum: {p:?}", metric.name)
                            };
                            streams.insert(key(&p.attributes), Point::Sum(n));
                        }
                    }
                    Some(Data::Histogram(histogram)) => {
                        for p in &histogram.data_points {
                            let point = Point::Histogram {
                                count: p.count,
                                sum: p.sum.unwrap(),
                            };
                            streams.insert(key(&p.attributes), point);
                        }
                    }
                    other => panic!("unexpected data for {}: {other:?}", metric.name),
                }
            }
        }
        streams
    }

    fn requests(&self) -> Vec<(String, Vec<u8>)> {
        self.received.lock().unwrap().clone()
    }

    /// Every span received, with its resource's `service.name`.
    fn spans(&self) -> Vec<(String, Span)> {
        let mut spans = Vec::new();
        for (content_type, body) in self.requests() {
            assert_eq!(content_type, "application/x-protobuf");
            let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
            for resource_spans in request.resource_spans {
                let service = resource_spans
                    .resource
                    .as_ref()
                    .and_then(|r| attr(&r.attributes, "service.name"))
                    .and_then(|v| str_value(&v))
                    .unwrap_or_default();
                for scope_spans in resource_spans.scope_spans {
                    for span in scope_spans.spans {
                        spans.push((service.clone(), span));
                    }
                }
            }
        }
        spans
    }
}

fn attr(attributes: &[KeyValue], key: &str) -> Option<AnyValue> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v: AnyValueMsg| v.value)
}

fn str_value(value: &AnyValue) -> Option<String> {
    match value {
        AnyValue::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A run shaped like the runtime's: an agent's `invoke_agent` span, a `chat` child with model,
/// token counts, credentials and message content, a failed `execute_tool` child, and a span of
/// another crate that the default filter keeps out. Returns the export, not yet flushed.
fn emit_run(config: &TelemetryConfig) -> OtlpExport {
    let (layer, export) = otlp_layer::<Registry>(config).unwrap().unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let agent = tracing::info_span!(
            target: "troupe::agent",
            "invoke_agent",
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.agent.name" = "coordinator",
            "troupe.trace_id" = TRACE_ID,
        );
        let _agent = agent.enter();
        {
            let chat = tracing::info_span!(
                target: "troupe::agent",
                "chat",
                "gen_ai.operation.name" = "chat",
                "gen_ai.request.model" = "scripted-1",
                "gen_ai.usage.input_tokens" = 42_u64,
                "gen_ai.usage.output_tokens" = tracing::field::Empty,
                api_key = API_KEY,
                authorization = format!("Bearer {BEARER_TOKEN}").as_str(),
                "troupe.note" = format!("retried with Bearer {BEARER_TOKEN}").as_str(),
                "gen_ai.input.messages" = format!(r#"[{{"role":"user","content":"{CONTENT}"}}]"#)
                    .as_str(),
            );
            let _chat = chat.enter();
            // Not troupe's: the default filter (`troupe=info,warn`) keeps it out.
            tracing::info_span!(target: "hyper_util::client", "connect").in_scope(|| {});
            tracing::warn!(
                target: "troupe::agent",
                api_key = API_KEY,
                "rate limited; retrying with key {API_KEY}"
            );
            chat.record("gen_ai.usage.output_tokens", 7_u64);
        }
        tracing::info_span!(
            target: "troupe::agent",
            "execute_tool",
            "gen_ai.tool.name" = "search",
            "error.type" = "timeout",
        )
        .in_scope(|| {});
    });
    export
}

fn find<'a>(spans: &'a [(String, Span)], name: &str) -> &'a Span {
    &spans
        .iter()
        .find(|(_, s)| s.name == name)
        .unwrap_or_else(|| panic!("no `{name}` span in {spans:?}"))
        .1
}

#[test]
fn spans_reach_the_collector_with_genai_attributes_and_no_secrets() {
    let collector = start_collector();
    let export = emit_run(&collector.config(false));
    export.flush().unwrap();

    let requests = collector.requests();
    assert!(!requests.is_empty(), "the collector received nothing");
    for (_, body) in &requests {
        let raw = String::from_utf8_lossy(body);
        for secret in [API_KEY, BEARER_TOKEN, "SECRET1234567890"] {
            assert!(!raw.contains(secret), "`{secret}` reached the collector");
        }
        assert!(
            !raw.contains(CONTENT),
            "message content reached the collector"
        );
    }

    let spans = collector.spans();
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    assert!(
        !names.contains(&"connect"),
        "the filter let through {names:?}"
    );
    assert_eq!(spans.len(), 3, "{names:?}");
    assert!(spans.iter().all(|(service, _)| service == "troupe"));

    let agent = find(&spans, "invoke_agent");
    let chat = find(&spans, "chat");
    let tool = find(&spans, "execute_tool");
    // One trace, the runtime's, with the agent as the parent of its model call and tool call.
    assert_eq!(hex(&agent.trace_id), TRACE_ID);
    assert_eq!(chat.trace_id, agent.trace_id);
    assert_eq!(tool.trace_id, agent.trace_id);
    assert!(agent.parent_span_id.is_empty());
    assert_eq!(chat.parent_span_id, agent.span_id);
    assert_eq!(tool.parent_span_id, agent.span_id);
    assert_ne!(chat.span_id, agent.span_id);

    let a = |name: &str| attr(&chat.attributes, name);
    assert_eq!(
        attr(&agent.attributes, "gen_ai.operation.name"),
        Some(AnyValue::StringValue("invoke_agent".into()))
    );
    assert_eq!(
        a("gen_ai.request.model"),
        Some(AnyValue::StringValue("scripted-1".into()))
    );
    assert_eq!(a("gen_ai.usage.input_tokens"), Some(AnyValue::IntValue(42)));
    assert_eq!(a("gen_ai.usage.output_tokens"), Some(AnyValue::IntValue(7)));
    let redacted = Some(AnyValue::StringValue("[redacted]".into()));
    assert_eq!(a("api_key"), redacted);
    assert_eq!(a("authorization"), redacted);
    assert_eq!(
        a("troupe.note"),
        Some(AnyValue::StringValue(
            "retried with Bearer [redacted]".into()
        ))
    );
    assert_eq!(a("gen_ai.input.messages"), None);

    // The warning inside the chat span is a span event, redacted the same way.
    let event = chat.events.first().expect("the warning event");
    assert_eq!(event.name, "rate limited; retrying with key [redacted]");
    assert_eq!(attr(&event.attributes, "api_key"), redacted);

    // `error.type` marks the span failed, as it does in the trace file.
    let status = tool.status.as_ref().expect("a status");
    assert_eq!(status.code, SpanStatus::Error as i32);
    export.shutdown().unwrap();
}

#[test]
fn a_team_run_is_one_trace_in_the_collector() {
    let collector = start_collector();
    let (layer, export) = otlp_layer::<Registry>(&collector.config(false))
        .unwrap()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    let answer = tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run_scripted_team())
    });
    assert_eq!(answer, "Crumb & Co.: fresh every morning.");
    export.flush().unwrap();

    let spans = collector.spans();
    let count = |name: &str| spans.iter().filter(|(_, s)| s.name == name).count();
    assert_eq!(count("invoke_agent"), 3, "coordinator, namer, copywriter");
    assert_eq!(count("chat"), 4);
    assert_eq!(count("execute_tool"), 2);
    // The workers' agents run in actors of their own, yet the request is one trace: the
    // runtime's, which every `invoke_agent` span names.
    let traces: std::collections::BTreeSet<String> =
        spans.iter().map(|(_, s)| hex(&s.trace_id)).collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    for (_, agent) in spans.iter().filter(|(_, s)| s.name == "invoke_agent") {
        assert_eq!(
            attr(&agent.attributes, "troupe.trace_id").and_then(|v| str_value(&v)),
            traces.first().cloned()
        );
    }
    for (_, chat) in spans.iter().filter(|(_, s)| s.name == "chat") {
        let parent = spans
            .iter()
            .find(|(_, s)| s.span_id == chat.parent_span_id)
            .map(|(_, s)| s.name.as_str());
        assert_eq!(parent, Some("invoke_agent"));
        assert!(matches!(
            attr(&chat.attributes, "gen_ai.usage.input_tokens"),
            Some(AnyValue::IntValue(n)) if n > 0
        ));
        assert!(matches!(
            attr(&chat.attributes, "gen_ai.usage.output_tokens"),
            Some(AnyValue::IntValue(n)) if n > 0
        ));
    }
    export.shutdown().unwrap();
}

#[test]
fn message_content_is_exported_only_when_recorded() {
    let collector = start_collector();
    let config = TelemetryConfig {
        service_name: Some("bakery-bot".to_string()),
        ..collector.config(true)
    };
    let export = emit_run(&config);
    export.shutdown().unwrap();

    let spans = collector.spans();
    assert!(spans.iter().all(|(service, _)| service == "bakery-bot"));
    let chat = find(&spans, "chat");
    let messages = attr(&chat.attributes, "gen_ai.input.messages")
        .and_then(|v| str_value(&v))
        .expect("content recorded");
    assert!(messages.contains(CONTENT), "{messages}");
    // Secrets stay out even when content is recorded.
    for (_, body) in collector.requests() {
        let raw = String::from_utf8_lossy(&body);
        assert!(!raw.contains(API_KEY) && !raw.contains(BEARER_TOKEN));
    }
}

#[test]
fn a_bad_endpoint_is_a_setup_error_naming_it() {
    let config = TelemetryConfig {
        otlp_endpoint: Some("not a url".to_string()),
        ..TelemetryConfig::default()
    };
    let err = match otlp_layer::<Registry>(&config) {
        Err(err) => err,
        Ok(_) => panic!("a malformed endpoint was accepted"),
    };
    assert!(matches!(err, TelemetryError::Otlp { .. }), "{err:?}");
    assert!(err.to_string().contains("not a url"), "{err}");
}

#[test]
fn no_endpoint_no_layer() {
    let config = TelemetryConfig::default();
    assert!(otlp_layer::<Registry>(&config).unwrap().is_none());
}

/// Not a test on its own: the child process of `init_from_env_exports_when_the_guard_drops`,
/// which installs the global subscriber from the environment, so it needs a process of its own.
#[test]
#[ignore = "run by init_from_env_exports_when_the_guard_drops"]
fn otlp_init_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let telemetry = troupe::telemetry::init().unwrap();
    assert!(
        telemetry.otlp().is_some(),
        "OTEL_EXPORTER_OTLP_ENDPOINT is set"
    );
    tracing::info_span!(
        target: "troupe::agent",
        "invoke_agent",
        "troupe.trace_id" = TRACE_ID,
        api_key = API_KEY,
    )
    .in_scope(|| {
        tracing::info_span!(target: "troupe::agent", "chat", "gen_ai.usage.input_tokens" = 3_u64)
            .in_scope(|| {});
    });
    // No flush: dropping the guard must send what is queued.
    drop(telemetry);
}

/// Run [`otlp_init_child`] against `collector`, with `env` set on top of the base endpoint.
fn run_init_child(collector: &Collector, env: &[(&str, &str)]) {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "suite::otlp::otlp_init_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("{}/", collector.base),
        )
        .env("OTEL_SERVICE_NAME", "from-env");
    for var in [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_METRICS_EXPORTER",
        "TROUPE_TRACE",
        "TROUPE_TRACE_FILTER",
        "TROUPE_TRACE_CONTENT",
        "RUST_LOG",
    ] {
        child.env_remove(var);
    }
    child.envs(env.iter().copied());
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the child failed or did not run:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn init_from_env_exports_when_the_guard_drops() {
    let collector = start_collector();
    run_init_child(&collector, &[]);

    // Metrics go to `/v1/metrics` under the same base endpoint.
    let key = (
        "gen_ai.client.token.usage".to_string(),
        pairs(&[("gen_ai.token.type", "input")]),
    );
    assert_eq!(
        collector.metrics().get(&key),
        Some(&Point::Histogram { count: 1, sum: 3.0 })
    );
    let spans = collector.spans();
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(spans.iter().all(|(service, _)| service == "from-env"));
    let agent = find(&spans, "invoke_agent");
    let chat = find(&spans, "chat");
    assert_eq!(hex(&agent.trace_id), TRACE_ID);
    assert_eq!(chat.parent_span_id, agent.span_id);
    assert_eq!(
        attr(&agent.attributes, "api_key"),
        Some(AnyValue::StringValue("[redacted]".into()))
    );
}

/// A real team run with content on exports the prompt and the tool arguments on the `chat` and
/// `execute_tool` spans; with it off, neither reaches the collector.
#[test]
fn a_team_run_exports_content_only_when_recorded() {
    for record_content in [true, false] {
        let collector = start_collector();
        let (layer, export) = otlp_layer::<Registry>(&collector.config(record_content))
            .unwrap()
            .unwrap();
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(run_scripted_team())
        });
        export.shutdown().unwrap();

        let spans = collector.spans();
        let text_of =
            |span: &Span, key: &str| attr(&span.attributes, key).and_then(|v| str_value(&v));
        let prompts: Vec<String> = spans
            .iter()
            .filter(|(_, s)| s.name == "chat")
            .filter_map(|(_, s)| text_of(s, "gen_ai.input.messages"))
            .collect();
        let arguments: Vec<String> = spans
            .iter()
            .filter(|(_, s)| s.name == "execute_tool")
            .filter_map(|(_, s)| text_of(s, "gen_ai.tool.call.arguments"))
            .collect();
        if record_content {
            assert!(
                prompts
                    .iter()
                    .any(|p| p.contains("Name and slogan, please.")),
                "{prompts:?}"
            );
            assert!(
                arguments.iter().any(|a| a.contains("A bakery name?")),
                "{arguments:?}"
            );
            assert!(
                spans.iter().any(
                    |(_, s)| s.name == "chat" && text_of(s, "gen_ai.output.messages").is_some()
                )
            );
        } else {
            assert!(prompts.is_empty() && arguments.is_empty());
            for (_, body) in collector.requests() {
                let raw = String::from_utf8_lossy(&body);
                assert!(!raw.contains("Name and slogan") && !raw.contains("A bakery name?"));
            }
        }
    }
}

/// The JSONL spans of `path` named `name`, as JSON.
fn trace_file_spans(path: &std::path::Path, name: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["span_id"].is_string() && l["name"] == name)
        .collect()
}

fn pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    pairs.sort();
    pairs
}

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

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
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
