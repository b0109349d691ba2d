//! The JSONL trace file: one line per closed span.
//!
//! Each line is a JSON object (see [`SpanLine`]): name, span id, parent span id, trace id, start
//! and end time, duration, attributes (every recorded field, `gen_ai.*` included) and the span's
//! warning/error events. Ids are generated here rather than taken from `tracing`, whose span ids
//! are reused after a span closes and so cannot name a span in a file. The trace id is the one
//! the `invoke_agent` span records as `troupe.trace_id` (so a file's traces match the runtime's
//! `TraceContext` and the event stream), inherited by child spans; a root span without one gets
//! a fresh id. Warnings and errors outside any span are written as lines of type `event`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use troupe_protocol::trace::{EventLine, SpanLine, TraceLine, semconv};
use troupe_protocol::{TraceContext, sync};

use super::fields::FieldCollector;

/// The open trace file, shared by the layer and the guard that flushes it.
#[derive(Debug)]
pub struct TraceFile {
    path: PathBuf,
    file: Mutex<File>,
}

impl TraceFile {
    /// Open `path` for appending (created `0o600` if missing): several runs, even concurrent
    /// ones, can share one file since every line names its trace.
    ///
    /// A file a killed run left ending in a torn line gets the line break it lacks first, so
    /// this run's first line is a line of its own (a reader skips the torn one and reads on).
    /// A symbolic link is followed (the path is the user's to name). A character device
    /// (`/dev/null`, a terminal) or a FIFO with a reader is written as it is; a FIFO with no
    /// reader is refused at once, never waited on; a directory, socket or block device is
    /// refused.
    ///
    /// # Errors
    /// The I/O error of creating or opening the file, or the refusal saying what it is.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = open_for_appending(&path)?;
        Ok(TraceFile {
            path,
            file: Mutex::new(file),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one line. Each line goes out in one `write` so that a reader following the file
    /// (`troupe trace --follow`) sees whole spans as soon as they close.
    fn write_line(&self, line: &TraceLine) {
        let Ok(mut text) = serde_json::to_string(line) else {
            return;
        };
        text.push('\n');
        let mut file = sync::lock(&self.file);
        // Tracing must never take the program down: a full disk loses trace lines, not work.
        let _ = file.write_all(text.as_bytes());
    }

    /// Flush the file to disk.
    pub fn flush(&self) {
        let mut file = sync::lock(&self.file);
        let _ = file.flush();
        let _ = file.sync_data();
    }
}

/// A refusal of the trace file: it is `kind`.
#[cfg_attr(not(unix), allow(dead_code))]
fn refused(kind: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("it is {kind}, which troupe does not append a trace to; name a regular file"),
    )
}

/// The trace file at `path`, open for appending and checked (see [`TraceFile::open`]).
fn open_for_appending(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
        // A trace holds prompts, tool results and errors: private when created (an existing
        // file keeps its mode).
        options.mode(0o600);
        // Not waiting on a FIFO's reader; the flag's bits fit an `i32` (a small constant).
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
        let kind = std::fs::metadata(path).ok().map(|m| m.file_type());
        if kind.is_some_and(|k| k.is_socket()) {
            return Err(refused("a socket"));
        }
        if kind.is_some_and(|k| k.is_block_device()) {
            return Err(refused("a block device"));
        }
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) {
            return std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "it is a FIFO with no reader, and troupe does not wait for one: start the \
                 reader first",
            );
        }
        e
    })?;
    let metadata = file.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        let kind = metadata.file_type();
        if !(kind.is_file() || kind.is_fifo() || kind.is_char_device()) {
            return Err(refused("not a regular file"));
        }
        // Opened; from here on writes wait for a slow reader as any write does.
        let flags = rustix::fs::fcntl_getfl(&file)?;
        rustix::fs::fcntl_setfl(&file, flags.difference(rustix::fs::OFlags::NONBLOCK))?;
    }
    if metadata.is_file() && metadata.len() > 0 && !ends_with_newline(path, &file)? {
        (&file).write_all(b"\n")?;
    }
    Ok(file)
}

/// Whether the regular file `file`, opened at `path`, ends with a line break (read through a
/// second handle, which must be the same file: the path may have been replaced since).
fn ends_with_newline(path: &Path, file: &File) -> std::io::Result<bool> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut reader = File::open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let (a, b) = (file.metadata()?, reader.metadata()?);
        if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
            // Not the file being appended to: leave its end alone.
            return Ok(true);
        }
    }
    #[cfg(not(unix))]
    let _ = file;
    reader.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    reader.read_exact(&mut last)?;
    Ok(last == *b"\n")
}

/// A `tracing` layer that writes every closed span to a [`TraceFile`].
#[derive(Debug, Clone)]
pub struct JsonlLayer {
    file: Arc<TraceFile>,
    record_content: bool,
}

impl JsonlLayer {
    /// A layer writing to `file`; message content is kept only if `record_content`.
    pub fn new(file: Arc<TraceFile>, record_content: bool) -> Self {
        JsonlLayer {
            file,
            record_content,
        }
    }
}

/// What the layer keeps in a span's extensions while it is open.
struct OpenSpan {
    span_id: u64,
    trace_id: u128,
    parent_span_id: Option<u64>,
    start: SystemTime,
    attributes: Map<String, Value>,
    events: Vec<EventLine>,
}

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn parse_trace_id(attributes: &Map<String, Value>) -> Option<u128> {
    let hex = attributes.get(semconv::TRACE_ID)?.as_str()?;
    u128::from_str_radix(hex, 16).ok().filter(|id| *id != 0)
}

/// A 64-bit span id given as 16 hex digits under `key` (troupe's own ids, for spans that link
/// across processes).
fn parse_span_id(attributes: &Map<String, Value>, key: &str) -> Option<u64> {
    troupe_protocol::trace::parse_span_id(attributes.get(key)?.as_str()?)
}

impl JsonlLayer {
    fn event_line(&self, event: &Event<'_>) -> EventLine {
        let mut attributes = Map::new();
        event.record(&mut FieldCollector {
            fields: &mut attributes,
            record_content: self.record_content,
        });
        let message = match attributes.remove("message") {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        EventLine {
            time_unix_nano: unix_nanos(SystemTime::now()),
            level: event.metadata().level().to_string(),
            message,
            attributes,
            trace_id: None,
        }
    }
}

impl<S> Layer<S> for JsonlLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut attributes = Map::new();
        attrs.record(&mut FieldCollector {
            fields: &mut attributes,
            record_content: self.record_content,
        });
        let parent = span.parent().and_then(|p| {
            p.extensions()
                .get::<OpenSpan>()
                .map(|open| (open.span_id, open.trace_id))
        });
        let fresh = TraceContext::new_root();
        let trace_id = parse_trace_id(&attributes)
            .or(parent.map(|(_, trace)| trace))
            .unwrap_or(fresh.trace_id);
        // A span sending a request to another node carries its id, and the span taking it
        // there names it as its parent: one request is one tree across the nodes' files.
        let span_id = parse_span_id(&attributes, semconv::SPAN_ID).unwrap_or(fresh.span_id);
        let parent_span_id = parent
            .map(|(id, _)| id)
            .or_else(|| parse_span_id(&attributes, semconv::REMOTE_PARENT_SPAN_ID));
        span.extensions_mut().insert(OpenSpan {
            span_id,
            trace_id,
            parent_span_id,
            start: SystemTime::now(),
            attributes,
            events: Vec::new(),
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        let Some(open) = extensions.get_mut::<OpenSpan>() else {
            return;
        };
        values.record(&mut FieldCollector {
            fields: &mut open.attributes,
            record_content: self.record_content,
        });
        if let Some(trace) = parse_trace_id(&open.attributes) {
            open.trace_id = trace;
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let level = *event.metadata().level();
        let has_error_field = event.metadata().fields().field("error").is_some();
        if level > Level::WARN && !has_error_field {
            return;
        }
        let line = self.event_line(event);
        match ctx.event_span(event) {
            Some(span) => {
                if let Some(open) = span.extensions_mut().get_mut::<OpenSpan>() {
                    open.events.push(line);
                }
            }
            None => self.file.write_line(&TraceLine::Event(line)),
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<OpenSpan>() else {
            return;
        };
        let end = SystemTime::now();
        let duration = end.duration_since(open.start).unwrap_or_default();
        // OpenTelemetry marks a failed span with `error.type` (or `otel.status_code = ERROR`).
        let failed = open.events.iter().any(EventLine::is_error)
            || open.attributes.contains_key("error.type")
            || open
                .attributes
                .get("otel.status_code")
                .and_then(Value::as_str)
                == Some("ERROR");
        let status = if failed { "error" } else { "ok" };
        let metadata = span.metadata();
        self.file.write_line(&TraceLine::Span(SpanLine {
            name: metadata.name().to_string(),
            trace_id: format!("{:032x}", open.trace_id),
            span_id: format!("{:016x}", open.span_id),
            parent_span_id: open.parent_span_id.map(|p| format!("{p:016x}")),
            start_time_unix_nano: unix_nanos(open.start),
            end_time_unix_nano: unix_nanos(end),
            duration_ms: duration.as_secs_f64() * 1000.0,
            target: metadata.target().to_string(),
            level: metadata.level().to_string(),
            status: status.to_string(),
            attributes: open.attributes,
            events: open.events,
        }));
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::TraceFile;

    #[test]
    fn a_new_trace_file_is_private_and_an_existing_one_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let new = dir.path().join("traces/run.jsonl");
        TraceFile::open(&new).unwrap();
        assert_eq!(mode(&new), 0o600);
        let shared = dir.path().join("shared.jsonl");
        std::fs::write(&shared, "").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
        TraceFile::open(&shared).unwrap();
        assert_eq!(mode(&shared), 0o644);
    }
}
