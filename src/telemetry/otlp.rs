//! OTLP export: the spans of the trace file, sent to an OpenTelemetry collector (feature `otlp`).
//!
//! Spans go out over OTLP/HTTP with protobuf bodies (`POST {endpoint}`, normally
//! `http://host:4318/v1/traces`), batched on a background thread by the OpenTelemetry SDK's
//! `BatchSpanProcessor` with a blocking HTTP client, so no async runtime is needed to set it up or
//! to shut it down. The layer takes the same filter as the trace file (`TROUPE_TRACE_FILTER`,
//! default `troupe=info,warn`) and obeys the same privacy rules: before a finished span reaches the
//! exporter, [`PrivacyProcessor`] drops message-content attributes ([`is_content_name`]) unless
//! content recording is on, replaces the values of credential-named attributes with
//! [`REDACTED`], and redacts credential-looking substrings ([`redact_value`]) in every other string:
//! attribute values, event names and attributes, link attributes and the status description.
//!
//! Trace ids follow the runtime's: a root span that records `troupe.trace_id` (every agent's
//! `invoke_agent` span does) is exported, with all its descendants, under that trace id, so one
//! user request is one trace in the collector across agent hops, as it is in the trace file.
//! A span that records `error.type` and has no status gets an `Error` status, as OpenTelemetry's
//! conventions ask. `tracing-opentelemetry` exports unsigned integer fields (the runtime's token
//! counts) as strings; the GenAI conventions' integer attributes ([`is_integer_name`]) are turned
//! back into integers.
//!
//! Metrics go out the same way, to their own endpoint (normally `http://host:4318/v1/metrics`),
//! from an SDK meter provider with a periodic reader (every 60 s, `OTEL_METRIC_EXPORT_INTERVAL`,
//! and on flush and shutdown); [`MetricsLayer`] records them from the spans as they close.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::{SpanContext, SpanId, Status, TraceId, TracerProvider as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_otlp::{MetricExporter, Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanProcessor,
};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;
use troupe_protocol::sync;
use troupe_protocol::trace::semconv;

use super::metrics::{MetricsLayer, is_measured};
use super::redact::{REDACTED, is_secret_name, redact_value};
use super::{
    DEFAULT_SERVICE_NAME, TRACE_FILTER_ENV, TelemetryConfig, TelemetryError, default_trace_filter,
    env_filter, is_content_name,
};

/// The instrumentation scope exported spans carry.
const SCOPE: &str = "troupe";

/// How long [`OtlpExport::shutdown`] waits for the last batch to go out.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// A boxed OTLP layer and the export it feeds (flush it, shut it down).
pub type OtlpLayer<S> = (Box<dyn Layer<S> + Send + Sync>, OtlpExport);

/// A running OTLP export: the tracer and meter providers behind an [`otlp_layer`]. Clones
/// share them.
#[derive(Debug, Clone)]
pub struct OtlpExport {
    tracer: Option<(SdkTracerProvider, String)>,
    meters: Option<(SdkMeterProvider, String)>,
}

impl OtlpExport {
    /// The URL spans are posted to, or else the URL metrics are posted to.
    pub fn endpoint(&self) -> &str {
        match (&self.tracer, &self.meters) {
            (Some((_, endpoint)), _) | (None, Some((_, endpoint))) => endpoint,
            (None, None) => "",
        }
    }

    /// The URL metrics are posted to, if metrics are exported.
    pub fn metrics_endpoint(&self) -> Option<&str> {
        self.meters.as_ref().map(|(_, endpoint)| endpoint.as_str())
    }

    /// Export every finished span and the metrics so far now, waiting for the collector's
    /// answers.
    ///
    /// # Errors
    /// The SDK's error when an export failed or timed out (its spans or points are then lost).
    pub fn flush(&self) -> Result<(), OTelSdkError> {
        let spans = self.tracer.as_ref().map(|(p, _)| p.force_flush());
        let metrics = self
            .meters
            .as_ref()
            .map(|(p, endpoint)| p.force_flush().map_err(|e| metrics_error(endpoint, e)));
        spans.unwrap_or(Ok(())).and(metrics.unwrap_or(Ok(())))
    }

    /// Export what is left and stop; spans that finish afterwards are not exported, nor are
    /// later metrics. Also done by the [`TelemetryGuard`](super::TelemetryGuard) on drop.
    ///
    /// # Errors
    /// The SDK's error when the last export failed, or the export was already shut down.
    pub fn shutdown(&self) -> Result<(), OTelSdkError> {
        let spans = self
            .tracer
            .as_ref()
            .map(|(p, _)| p.shutdown_with_timeout(SHUTDOWN_TIMEOUT));
        let metrics = self.meters.as_ref().map(|(p, endpoint)| {
            p.shutdown_with_timeout(SHUTDOWN_TIMEOUT)
                .map_err(|e| metrics_error(endpoint, e))
        });
        spans.unwrap_or(Ok(())).and(metrics.unwrap_or(Ok(())))
    }
}

/// A metrics export error that names where metrics went: the guard's warning names the spans'
/// endpoint, which is not this one.
fn metrics_error(endpoint: &str, error: OTelSdkError) -> OTelSdkError {
    OTelSdkError::InternalFailure(format!("metrics to {endpoint}: {error}"))
}

/// The OTLP layer for `config`, if it names an endpoint ([`TelemetryConfig::otlp_endpoint`] for
/// spans, [`TelemetryConfig::otlp_metrics_endpoint`] for metrics); for programs that build their
/// own subscriber. Keep the [`OtlpExport`] and flush or shut it down before exiting, or the last
/// spans and metrics are lost.
///
/// # Errors
/// [`TelemetryError::Otlp`] when the exporter cannot be built (a malformed endpoint, say), and
/// [`TelemetryError::Filter`] when the trace filter does not parse.
pub fn otlp_layer<S>(config: &TelemetryConfig) -> Result<Option<OtlpLayer<S>>, TelemetryError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    if config.otlp_endpoint.is_none() && config.otlp_metrics_endpoint.is_none() {
        return Ok(None);
    }
    // The exporters' HTTP client (reqwest) has no crypto provider of its own.
    troupe_host::tls::install_crypto_provider();
    let export = OtlpExport {
        tracer: match config.otlp_endpoint.as_deref() {
            Some(endpoint) => Some((tracer_provider(config, endpoint)?, endpoint.to_string())),
            None => None,
        },
        meters: match config.otlp_metrics_endpoint.as_deref() {
            Some(endpoint) => Some((meter_provider(config, endpoint)?, endpoint.to_string())),
            None => None,
        },
    };
    let mut layers: Vec<Box<dyn Layer<S> + Send + Sync>> = Vec::new();
    if let Some((provider, _)) = &export.tracer {
        // As for the trace file: a layer that wants content has the agents build it.
        if config.record_content {
            troupe_protocol::trace::set_record_content(true);
        }
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer(SCOPE))
            .with_level(true)
            .with_target(true)
            .with_threads(false);
        layers.push(match &config.trace_filter {
            Some(directives) => {
                Box::new(layer.with_filter(env_filter(TRACE_FILTER_ENV, directives)?))
            }
            None => Box::new(layer.with_filter(default_trace_filter())),
        });
    }
    if let Some((provider, _)) = &export.meters {
        // Metrics do not follow the trace filter: a dashboard's numbers stay whole however few
        // spans are exported.
        let layer = MetricsLayer::new(&provider.meter(SCOPE));
        layers.push(Box::new(layer.with_filter(filter_fn(is_measured))));
    }
    Ok(Some((Box::new(layers), export)))
}

fn service_resource(config: &TelemetryConfig) -> Resource {
    let service_name = config
        .service_name
        .clone()
        .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_string());
    Resource::builder().with_service_name(service_name).build()
}

fn meter_provider(
    config: &TelemetryConfig,
    endpoint: &str,
) -> Result<SdkMeterProvider, TelemetryError> {
    let exporter = MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| TelemetryError::Otlp {
            endpoint: endpoint.to_string(),
            reason: e.to_string(),
        })?;
    Ok(SdkMeterProvider::builder()
        .with_periodic_exporter(exporter)
        .with_resource(service_resource(config))
        .build())
}

fn tracer_provider(
    config: &TelemetryConfig,
    endpoint: &str,
) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| TelemetryError::Otlp {
            endpoint: endpoint.to_string(),
            reason: e.to_string(),
        })?;
    let processor = PrivacyProcessor::new(
        BatchSpanProcessor::builder(exporter).build(),
        config.record_content,
    );
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(service_resource(config))
        .build())
}

/// A span processor that applies the trace file's privacy rules to every finished span, and the
/// runtime's trace ids, before handing it to `next` (the exporting processor).
#[derive(Debug)]
pub struct PrivacyProcessor<P> {
    next: P,
    record_content: bool,
    /// The SDK's trace id of each open root span that recorded `troupe.trace_id` → that id and
    /// the root's span id.
    trace_ids: Mutex<HashMap<TraceId, (TraceId, SpanId)>>,
}

impl<P: SpanProcessor> PrivacyProcessor<P> {
    /// Wrap `next`; message content is kept only if `record_content`.
    pub fn new(next: P, record_content: bool) -> Self {
        PrivacyProcessor {
            next,
            record_content,
            trace_ids: Mutex::new(HashMap::new()),
        }
    }

    /// `attributes` with content dropped (unless recorded) and secrets redacted.
    fn scrub_attributes(&self, attributes: &mut Vec<KeyValue>) {
        attributes.retain(|kv| self.record_content || !is_content_name(kv.key.as_str()));
        for kv in attributes.iter_mut() {
            if is_secret_name(kv.key.as_str()) {
                kv.value = Value::from(REDACTED);
            } else if is_integer_name(kv.key.as_str()) {
                integer_again(&mut kv.value);
            } else {
                scrub_value(&mut kv.value);
            }
        }
    }

    fn scrub(&self, span: &mut SpanData) {
        self.scrub_attributes(&mut span.attributes);
        for event in span.events.events.iter_mut() {
            scrub_cow(&mut event.name);
            self.scrub_attributes(&mut event.attributes);
        }
        for link in span.links.links.iter_mut() {
            self.scrub_attributes(&mut link.attributes);
        }
        match &mut span.status {
            Status::Error { description } => scrub_cow(description),
            Status::Unset => {
                if let Some(kv) = span
                    .attributes
                    .iter()
                    .find(|kv| kv.key.as_str() == "error.type")
                {
                    span.status = Status::error(kv.value.as_str().into_owned());
                }
            }
            Status::Ok => {}
        }
    }

    /// Move `span` into the runtime's trace, if its root named one.
    fn retrace(&self, span: &mut SpanData) {
        let sdk_trace = span.span_context.trace_id();
        let mut trace_ids = sync::lock(&self.trace_ids);
        let Some(&(trace, root)) = trace_ids.get(&sdk_trace) else {
            return;
        };
        if span.span_context.span_id() == root {
            trace_ids.remove(&sdk_trace);
        }
        drop(trace_ids);
        let old = &span.span_context;
        span.span_context = SpanContext::new(
            trace,
            old.span_id(),
            old.trace_flags(),
            old.is_remote(),
            old.trace_state().clone(),
        );
    }
}

/// Whether the GenAI semantic conventions type this attribute as an integer: the token counts
/// (`gen_ai.usage.*`) and the request's `max_tokens`, `seed` and `choice.count`.
pub fn is_integer_name(name: &str) -> bool {
    name.starts_with(semconv::USAGE_PREFIX)
        || [
            semconv::REQUEST_MAX_TOKENS,
            semconv::REQUEST_SEED,
            semconv::REQUEST_CHOICE_COUNT,
        ]
        .contains(&name)
}

/// An integer that reached the SDK as a string (`tracing` `u64` fields do), as an integer again.
fn integer_again(value: &mut Value) {
    let parsed = match value {
        Value::String(s) => s.as_str().parse::<i64>().ok(),
        _ => None,
    };
    if let Some(n) = parsed {
        *value = Value::I64(n);
    }
}

/// `value` with credential-looking substrings redacted.
fn scrub_value(value: &mut Value) {
    match value {
        Value::String(s) => {
            let redacted = redact_value(s.as_str());
            if redacted != s.as_str() {
                *s = StringValue::from(redacted);
            }
        }
        Value::Array(Array::String(items)) => {
            for s in items.iter_mut() {
                let redacted = redact_value(s.as_str());
                if redacted != s.as_str() {
                    *s = StringValue::from(redacted);
                }
            }
        }
        _ => {}
    }
}

fn scrub_cow(text: &mut Cow<'static, str>) {
    let redacted = redact_value(text);
    if redacted != *text {
        *text = Cow::Owned(redacted);
    }
}

/// The span id (16 hex digits) a span's attributes give under `key`, if any.
fn named_span(attributes: &[KeyValue], key: &str) -> Option<SpanId> {
    let kv = attributes.iter().find(|kv| kv.key.as_str() == key)?;
    troupe_protocol::trace::parse_span_id(&kv.value.as_str()).map(SpanId::from)
}

/// Link a span across processes: a span sending a request to another node takes the id it
/// gave the request (`troupe.span_id`), and a root span taking one names the sending span as
/// its (remote) parent (`troupe.remote_parent_span_id`) — as the trace file does.
fn relink(span: &mut SpanData) {
    if let Some(id) = named_span(&span.attributes, semconv::SPAN_ID) {
        let old = &span.span_context;
        span.span_context = SpanContext::new(
            old.trace_id(),
            id,
            old.trace_flags(),
            old.is_remote(),
            old.trace_state().clone(),
        );
    }
    if span.parent_span_id == SpanId::INVALID
        && let Some(parent) = named_span(&span.attributes, semconv::REMOTE_PARENT_SPAN_ID)
    {
        span.parent_span_id = parent;
        span.parent_span_is_remote = true;
    }
}

/// The trace id a span's attributes name through `troupe.trace_id`, if any.
fn named_trace(attributes: &[KeyValue]) -> Option<TraceId> {
    let kv = attributes
        .iter()
        .find(|kv| kv.key.as_str() == semconv::TRACE_ID)?;
    let hex = kv.value.as_str();
    let id = u128::from_str_radix(&hex, 16).ok().filter(|id| *id != 0)?;
    Some(TraceId::from(id))
}

impl<P: SpanProcessor> SpanProcessor for PrivacyProcessor<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        use opentelemetry::trace::{Span as _, TraceContextExt as _};
        // A root span that names the runtime's trace: remember it, so that it and its
        // descendants (which end before it) are exported under that trace id.
        if !cx.has_active_span() || !cx.span().span_context().is_valid() {
            let sdk = span.span_context().clone();
            if let Some(trace) = span
                .exported_data()
                .and_then(|data| named_trace(&data.attributes))
            {
                sync::lock(&self.trace_ids).insert(sdk.trace_id(), (trace, sdk.span_id()));
            }
        }
        self.next.on_start(span, cx);
    }

    fn on_end(&self, mut span: SpanData) {
        self.scrub(&mut span);
        self.retrace(&mut span);
        relink(&mut span);
        self.next.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.next.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.next.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.next.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_redacted_in_strings_and_string_arrays() {
        let mut v = Value::from("Bearer sk-abcdef123456");
        scrub_value(&mut v);
        assert_eq!(v.as_str(), "Bearer [redacted]");
        let mut v = Value::Array(Array::String(vec![
            StringValue::from("ok"),
            StringValue::from("key sk-abcdef123456"),
        ]));
        scrub_value(&mut v);
        assert_eq!(
            v,
            Value::Array(Array::String(vec![
                StringValue::from("ok"),
                StringValue::from("key [redacted]"),
            ]))
        );
        let mut v = Value::I64(7);
        scrub_value(&mut v);
        assert_eq!(v, Value::I64(7));
    }

    #[test]
    fn genai_integer_attributes_are_integers_again() {
        assert!(is_integer_name("gen_ai.usage.input_tokens"));
        assert!(is_integer_name("gen_ai.request.max_tokens"));
        assert!(!is_integer_name("gen_ai.tool.call.id"));
        let mut v = Value::from("42");
        integer_again(&mut v);
        assert_eq!(v, Value::I64(42));
        let mut v = Value::from("lots");
        integer_again(&mut v);
        assert_eq!(v, Value::from("lots"));
    }

    #[test]
    fn named_trace_reads_troupe_trace_id() {
        let attrs = [KeyValue::new(
            semconv::TRACE_ID,
            "0123456789abcdef0123456789abcdef",
        )];
        assert_eq!(
            named_trace(&attrs),
            Some(TraceId::from(0x0123456789abcdef0123456789abcdef_u128))
        );
        assert_eq!(named_trace(&[KeyValue::new(semconv::TRACE_ID, "zz")]), None);
        assert_eq!(named_trace(&[]), None);
    }
}
