//! Telemetry for troupe programs: console logs, a JSONL trace file and, with the `otlp` feature,
//! export of the same spans to an OpenTelemetry collector over OTLP/HTTP (see `otlp`).
//!
//! ```no_run
//! # fn main() -> Result<(), troupe::telemetry::TelemetryError> {
//! // RUST_LOG=info for console logs; TROUPE_TRACE=run.jsonl for a trace file.
//! let _telemetry = troupe::telemetry::init()?;
//! // … run the team; the trace file is flushed when `_telemetry` drops.
//! # Ok(()) }
//! ```
//!
//! | variable | effect |
//! | --- | --- |
//! | `RUST_LOG` | console filter (stderr), default `warn` |
//! | `TROUPE_TRACE=FILE` | append one JSON line per closed span to `FILE` (see [`jsonl`]) |
//! | `TROUPE_TRACE_CONTENT=1` | also record message content (prompts, completions, tool I/O) |
//! | `TROUPE_TRACE_FILTER` | which spans go to the file and to OTLP (an `EnvFilter`), default `troupe=info,warn` |
//! | `OTEL_EXPORTER_OTLP_ENDPOINT=URL` | feature `otlp`: export spans to `URL/v1/traces` (OTLP/HTTP, protobuf) |
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=URL` | feature `otlp`: the same, to `URL` as given |
//! | `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=URL` | feature `otlp`: metrics (see `metrics`) to `URL` as given; else to `{OTEL_EXPORTER_OTLP_ENDPOINT}/v1/metrics` |
//! | `OTEL_METRICS_EXPORTER=none` | feature `otlp`: export no metrics (for a collector that takes spans only) |
//! | `OTEL_SERVICE_NAME` | feature `otlp`: `service.name` of the exported spans, default `troupe` |
//!
//! Secrets never reach the file, the collector or the console: fields named like credentials,
//! credential-named keys in text (`api_key=…`, `x-api-key: …`, `"password": "…"`) and values
//! shaped like one (`Bearer …`, `sk-…`, JWTs, `ghp_…`, `AKIA…`, …) are redacted by one function
//! ([`redact`]); the console formats fields through it ([`RedactedFields`]). Message content
//! (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`,
//! `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) is built and written only when
//! `TROUPE_TRACE_CONTENT` asks for it, redacted the same way. Without the `otlp` feature an
//! OTLP endpoint in the environment is ignored with a warning.

pub mod console;
mod fields;
pub mod jsonl;
#[cfg(feature = "otlp")]
pub mod metrics;
#[cfg(feature = "otlp")]
pub mod otlp;
// The redaction rules live in the runtime so that every crate (the MCP client too) uses the same
// ones; `troupe::telemetry::redact` stays their path here.
pub use troupe_runtime::redact;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

pub use console::RedactedFields;
pub use fields::{CONTENT_PREFIXES, is_content_name};
pub use jsonl::{JsonlLayer, TraceFile};
#[cfg(feature = "otlp")]
pub use otlp::{OtlpExport, OtlpLayer, otlp_layer};

/// Names the trace file.
pub const TRACE_ENV: &str = "TROUPE_TRACE";
/// `1`/`true` records message content in traces.
pub const TRACE_CONTENT_ENV: &str = troupe_protocol::trace::TRACE_CONTENT_ENV;
/// Overrides which spans go to the trace file.
pub const TRACE_FILTER_ENV: &str = "TROUPE_TRACE_FILTER";
/// The OTLP base URL (OpenTelemetry's variable); traces go to `{base}/v1/traces`.
pub const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The OTLP traces URL, used as given; wins over [`OTLP_ENDPOINT_ENV`].
pub const OTLP_TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The OTLP metrics URL, used as given; wins over [`OTLP_ENDPOINT_ENV`].
pub const OTLP_METRICS_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// `none` turns metrics export off (OpenTelemetry's variable), for a collector that takes spans
/// only.
pub const METRICS_EXPORTER_ENV: &str = "OTEL_METRICS_EXPORTER";
/// `service.name` of exported spans (OpenTelemetry's variable).
pub const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";
/// `service.name` when [`SERVICE_NAME_ENV`] is not set.
pub const DEFAULT_SERVICE_NAME: &str = "troupe";

/// What [`init_with`] sets up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// Console filter directives (`RUST_LOG` syntax); `None` means `warn`.
    pub console_filter: Option<String>,
    /// The JSONL trace file, if any.
    pub trace_file: Option<PathBuf>,
    /// Which spans go to the trace file (`EnvFilter` syntax); `None` means `troupe=info,warn`.
    pub trace_filter: Option<String>,
    /// Whether message content is recorded.
    pub record_content: bool,
    /// The OTLP/HTTP URL spans are posted to (`http://host:4318/v1/traces`), if any. Used only
    /// with the `otlp` feature; without it a configured endpoint is ignored with a warning.
    pub otlp_endpoint: Option<String>,
    /// The OTLP/HTTP URL metrics are posted to (`http://host:4318/v1/metrics`), if any; feature
    /// `otlp`, as for [`otlp_endpoint`](Self::otlp_endpoint).
    pub otlp_metrics_endpoint: Option<String>,
    /// `service.name` of exported spans; `None` means [`DEFAULT_SERVICE_NAME`].
    pub service_name: Option<String>,
}

impl TelemetryConfig {
    /// The configuration the environment asks for (see the module docs).
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        TelemetryConfig {
            console_filter: var("RUST_LOG"),
            trace_file: var(TRACE_ENV).map(PathBuf::from),
            trace_filter: var(TRACE_FILTER_ENV),
            record_content: content_enabled(),
            otlp_endpoint: otlp_signal_endpoint(
                var(OTLP_TRACES_ENDPOINT_ENV),
                var(OTLP_ENDPOINT_ENV),
                "traces",
            ),
            otlp_metrics_endpoint: otlp_signal_endpoint(
                var(OTLP_METRICS_ENDPOINT_ENV),
                var(OTLP_ENDPOINT_ENV),
                "metrics",
            )
            // OpenTelemetry's switch, for a collector that takes spans only.
            .filter(|_| var(METRICS_EXPORTER_ENV).as_deref() != Some("none")),
            service_name: var(SERVICE_NAME_ENV),
        }
    }
}

/// The OTLP URL of one signal (`traces`, `metrics`), as OpenTelemetry specifies it for
/// OTLP/HTTP: the signal's endpoint as given, else `/v1/{signal}` under the base endpoint.
fn otlp_signal_endpoint(
    given: Option<String>,
    base: Option<String>,
    signal: &str,
) -> Option<String> {
    given.or_else(|| base.map(|base| format!("{}/v1/{signal}", base.trim_end_matches('/'))))
}

/// Whether `TROUPE_TRACE_CONTENT` asks for message content in traces. Code that records content
/// checks [`troupe_protocol::trace::record_content`] (which [`init_with`] sets from the config)
/// and uses attribute names from [`CONTENT_PREFIXES`], which the trace file and OTLP drop unless
/// content recording is on.
pub fn content_enabled() -> bool {
    troupe_protocol::trace::content_env_enabled()
}

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The trace file could not be opened.
    #[error("cannot open the trace file {path}: {cause}")]
    TraceFile {
        /// The trace file's path (`TROUPE_TRACE`).
        path: PathBuf,
        /// The error opening or creating it.
        cause: std::io::Error,
    },
    /// A filter directive did not parse.
    #[error("bad filter `{directives}` in {variable}: {reason}")]
    Filter {
        /// `RUST_LOG` or `TROUPE_TRACE_FILTER`.
        variable: &'static str,
        /// The filter text as given.
        directives: String,
        /// The parser's message.
        reason: String,
    },
    /// The OTLP exporter could not be set up.
    #[error("cannot export traces over OTLP to {endpoint}: {reason}")]
    Otlp {
        /// The configured endpoint.
        endpoint: String,
        /// The exporter's error, as text.
        reason: String,
    },
    /// A global subscriber was already installed.
    #[error("telemetry is already initialized: {0}")]
    AlreadyInitialized(String),
}

/// Keeps telemetry running; flushes the trace file and shuts OTLP export down (sending the
/// spans still queued) when dropped.
#[must_use = "dropping the guard flushes and ends trace export"]
#[derive(Debug, Default)]
pub struct TelemetryGuard {
    trace_file: Option<Arc<TraceFile>>,
    #[cfg(feature = "otlp")]
    otlp: Option<OtlpExport>,
}

impl TelemetryGuard {
    /// The trace file being written, if any.
    pub fn trace_file(&self) -> Option<&Path> {
        self.trace_file.as_deref().map(TraceFile::path)
    }

    /// The OTLP export, if spans are being exported.
    #[cfg(feature = "otlp")]
    pub fn otlp(&self) -> Option<&OtlpExport> {
        self.otlp.as_ref()
    }

    /// Flush the trace file and export the finished spans now (both also happen on drop). An
    /// export that fails is reported as a warning; telemetry never fails the program.
    pub fn flush(&self) {
        if let Some(file) = &self.trace_file {
            file.flush();
        }
        #[cfg(feature = "otlp")]
        if let Some(Err(e)) = self.otlp.as_ref().map(OtlpExport::flush) {
            warn_export_failed(self.otlp.as_ref(), &e);
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(file) = &self.trace_file {
            file.flush();
        }
        // Shutting down exports what is still queued; the program is ending, so a failure can
        // only be mentioned.
        #[cfg(feature = "otlp")]
        if let Some(Err(e)) = self.otlp.as_ref().map(OtlpExport::shutdown) {
            warn_export_failed(self.otlp.as_ref(), &e);
        }
    }
}

#[cfg(feature = "otlp")]
fn warn_export_failed(otlp: Option<&OtlpExport>, error: &dyn std::fmt::Display) {
    let endpoint = otlp.map_or("", OtlpExport::endpoint);
    tracing::warn!(target: "troupe::telemetry", "OTLP export to {endpoint} failed: {error}");
}

/// Set up telemetry from the environment (see the module docs) as the global subscriber.
///
/// # Errors
/// [`TelemetryError`] when the trace file cannot be opened, a filter does not parse, or a global
/// subscriber is already installed.
pub fn init() -> Result<TelemetryGuard, TelemetryError> {
    init_with(TelemetryConfig::from_env())
}

fn env_filter(variable: &'static str, directives: &str) -> Result<EnvFilter, TelemetryError> {
    EnvFilter::try_new(directives).map_err(|e| TelemetryError::Filter {
        variable,
        directives: directives.to_string(),
        reason: e.to_string(),
    })
}

/// Which spans the trace file gets: troupe's own at INFO and above, others' warnings only, so
/// HTTP client internals do not drown the agent tree.
fn default_trace_filter() -> Targets {
    Targets::new()
        .with_target("troupe", tracing::Level::INFO)
        .with_default(tracing::Level::WARN)
}

/// A boxed trace-file layer and the file it writes (flushed on drop).
pub type TraceFileLayer<S> = (Box<dyn Layer<S> + Send + Sync>, Arc<TraceFile>);

/// The JSONL trace layer for `config`, if it names a trace file; for programs that build their
/// own subscriber.
///
/// # Errors
/// As [`init`].
pub fn trace_file_layer<S>(
    config: &TelemetryConfig,
) -> Result<Option<TraceFileLayer<S>>, TelemetryError>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let Some(path) = &config.trace_file else {
        return Ok(None);
    };
    let file = TraceFile::open(path).map_err(|source| TelemetryError::TraceFile {
        path: path.clone(),
        cause: source,
    })?;
    let file = Arc::new(file);
    // The agents build content only when the runtime's switch is on. A layer that wants content
    // turns it on; it never turns it off, since another subscriber (a test's, say) may want it.
    if config.record_content {
        troupe_protocol::trace::set_record_content(true);
    }
    let layer = JsonlLayer::new(Arc::clone(&file), config.record_content);
    let layer: Box<dyn Layer<S> + Send + Sync> = match &config.trace_filter {
        Some(directives) => Box::new(layer.with_filter(env_filter(TRACE_FILTER_ENV, directives)?)),
        None => Box::new(layer.with_filter(default_trace_filter())),
    };
    Ok(Some((layer, file)))
}

/// Set up telemetry as described by `config` as the global subscriber.
///
/// # Errors
/// As [`init`].
pub fn init_with(config: TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    let console_filter = env_filter(
        "RUST_LOG",
        config.console_filter.as_deref().unwrap_or("warn"),
    )?;
    let console = tracing_subscriber::fmt::layer()
        .fmt_fields(RedactedFields)
        .with_writer(std::io::stderr)
        .with_filter(console_filter);
    let (trace_layer, trace_file) = match trace_file_layer::<Registry>(&config)? {
        Some((layer, file)) => (Some(layer), Some(file)),
        None => (None, None),
    };
    #[cfg(feature = "otlp")]
    let (otlp_layer, otlp) = match otlp_layer::<Registry>(&config)? {
        Some((layer, export)) => (Some(layer), Some(export)),
        None => (None, None),
    };
    #[cfg(not(feature = "otlp"))]
    let otlp_layer: Option<Box<dyn Layer<Registry> + Send + Sync>> = None;
    let layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = [
        Some(Box::new(console) as Box<dyn Layer<Registry> + Send + Sync>),
        trace_layer,
        otlp_layer,
    ]
    .into_iter()
    .flatten()
    .collect();
    let guard = TelemetryGuard {
        trace_file,
        #[cfg(feature = "otlp")]
        otlp,
    };
    // On failure the guard drops here, shutting down an export that never got a span.
    tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .map_err(|e| TelemetryError::AlreadyInitialized(e.to_string()))?;
    // The global subscriber decides: content is built for the spans exactly when it is kept.
    troupe_protocol::trace::set_record_content(config.record_content);
    #[cfg(not(feature = "otlp"))]
    if let Some(endpoint) = config
        .otlp_endpoint
        .as_ref()
        .or(config.otlp_metrics_endpoint.as_ref())
    {
        tracing::warn!(
            target: "troupe::telemetry",
            "OTLP export to {endpoint} is not built into this troupe (cargo feature `otlp`); \
             spans and metrics are not exported"
        );
    }
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otlp_endpoint_follows_the_opentelemetry_variables() {
        let some = |s: &str| Some(s.to_string());
        assert_eq!(otlp_signal_endpoint(None, None, "traces"), None);
        assert_eq!(
            otlp_signal_endpoint(None, some("http://collector:4318"), "traces"),
            some("http://collector:4318/v1/traces")
        );
        assert_eq!(
            otlp_signal_endpoint(None, some("http://collector:4318/"), "metrics"),
            some("http://collector:4318/v1/metrics")
        );
        assert_eq!(
            otlp_signal_endpoint(
                some("http://c:4318/custom"),
                some("http://other:4318"),
                "traces"
            ),
            some("http://c:4318/custom")
        );
    }
}
