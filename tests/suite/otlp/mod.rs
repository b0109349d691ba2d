//! OTLP export (feature `otlp`): spans shaped like the runtime's go to a fake OTLP/HTTP collector,
//! which decodes them with the real OTLP protobuf schema; secrets and (by default) message content
//! must not reach it. Metrics go to the same collector's `POST /v1/metrics`.
//!
//! This module holds the collector and what both suites share; `spans.rs` checks the spans,
//! `metrics.rs` the metrics.

mod cache_metrics;
mod metrics;
mod spans;
mod spend_rate_metrics;

use std::process::Command;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::{AnyValue as AnyValueMsg, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point};
use opentelemetry_proto::tonic::trace::v1::{Span, status::StatusCode as SpanStatus};
use prost::Message;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::net::tcp::OwnedReadHalf;
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
/// until dropped. Plain HTTP/1.1 as the exporters speak it (a body of known length, connections
/// kept alive), with no web framework: a framework's server features would leave the examples'
/// build with other features than the binary's (`feature_sets.rs`).
struct Collector {
    _runtime: tokio::runtime::Runtime,
    base: String,
    received: Received,
    metrics: Received,
}

/// One HTTP/1.1 request from `reader`: its path, content type and body; `None` once the
/// connection ends.
async fn read_http_request(
    reader: &mut BufReader<OwnedReadHalf>,
) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1)?.to_string();
    let (mut length, mut content_type) = (0usize, String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            } else if name.eq_ignore_ascii_case("content-type") {
                content_type = value.trim().to_string();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.ok()?;
    Some((path, content_type, body))
}

/// Serve every connection to `listener` on the current runtime (in its own task, so a test on
/// paused time sees the server's work as the runtime's), each request answered by
/// `answer(path, content type, body)` with a whole HTTP response.
fn serve_http(
    listener: TcpListener,
    answer: impl Fn(&str, String, Vec<u8>) -> String + Send + Sync + 'static,
) {
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let answer = Arc::clone(&answer);
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut reader = BufReader::new(read);
                while let Some((path, content_type, body)) = read_http_request(&mut reader).await {
                    let response = answer(&path, content_type, body);
                    if write.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}

fn start_collector() -> Collector {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (received, metrics) = (Received::default(), Received::default());
    let (traces_to, metrics_to) = (Arc::clone(&received), Arc::clone(&metrics));
    let entered = runtime.enter();
    serve_http(listener, move |path, content_type, body| {
        let to = match path {
            "/v1/traces" => &traces_to,
            "/v1/metrics" => &metrics_to,
            _ => return "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string(),
        };
        to.lock().unwrap().push((content_type, body));
        // An empty body is an empty `ExportTraceServiceResponse`: full success.
        "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_string()
    });
    drop(entered);
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
