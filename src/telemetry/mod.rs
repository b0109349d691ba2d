//! Telemetry for troupe programs: console logs and a JSONL trace file. (OTLP export to an
//! OpenTelemetry collector is not built yet; the span names and `gen_ai.*` attributes are the
//! ones an OTLP layer would export.)
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
//! | `TROUPE_TRACE_FILTER` | which spans go to the file (an `EnvFilter`), default `troupe=info,warn` |
//!
//! Secrets never reach the file: fields named like credentials and values that look like one
//! (`Bearer …`, `sk-…`, `Authorization: …`) are redacted ([`redact`]).

mod fields;
pub mod jsonl;
pub mod redact;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

pub use fields::{CONTENT_PREFIXES, is_content_name};
pub use jsonl::{JsonlLayer, TraceFile};

/// Names the trace file.
pub const TRACE_ENV: &str = "TROUPE_TRACE";
/// `1`/`true` records message content in traces.
pub const TRACE_CONTENT_ENV: &str = "TROUPE_TRACE_CONTENT";
/// Overrides which spans go to the trace file.
pub const TRACE_FILTER_ENV: &str = "TROUPE_TRACE_FILTER";

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
        }
    }
}

/// Whether `TROUPE_TRACE_CONTENT` asks for message content in traces. Code that records content
/// should check this and use attribute names from [`CONTENT_PREFIXES`], which the trace file
/// drops unless this is on.
pub fn content_enabled() -> bool {
    std::env::var(TRACE_CONTENT_ENV).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The trace file could not be opened.
    #[error("cannot open the trace file {path}: {source}")]
    TraceFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A filter directive did not parse.
    #[error("bad filter `{directives}` in {variable}: {reason}")]
    Filter {
        /// `RUST_LOG` or `TROUPE_TRACE_FILTER`.
        variable: &'static str,
        /// The directives.
        directives: String,
        /// The parser's message.
        reason: String,
    },
    /// A global subscriber was already installed.
    #[error("telemetry is already initialized: {0}")]
    AlreadyInitialized(String),
}

/// Keeps telemetry running; flushes the trace file when dropped.
#[must_use = "dropping the guard flushes and ends trace export"]
#[derive(Debug, Default)]
pub struct TelemetryGuard {
    trace_file: Option<Arc<TraceFile>>,
}

impl TelemetryGuard {
    /// The trace file being written, if any.
    pub fn trace_file(&self) -> Option<&Path> {
        self.trace_file.as_deref().map(TraceFile::path)
    }

    /// Flush the trace file now (it is also flushed on drop).
    pub fn flush(&self) {
        if let Some(file) = &self.trace_file {
            file.flush();
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        self.flush();
    }
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
        source,
    })?;
    let file = Arc::new(file);
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
        .with_writer(std::io::stderr)
        .with_filter(console_filter);
    let (trace_layer, trace_file) = match trace_file_layer::<Registry>(&config)? {
        Some((layer, file)) => (Some(layer), Some(file)),
        None => (None, None),
    };
    let layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = [
        Some(Box::new(console) as Box<dyn Layer<Registry> + Send + Sync>),
        trace_layer,
    ]
    .into_iter()
    .flatten()
    .collect();
    tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .map_err(|e| TelemetryError::AlreadyInitialized(e.to_string()))?;
    Ok(TelemetryGuard { trace_file })
}
