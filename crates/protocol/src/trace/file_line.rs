//! The trace file's line format: what the facade's JSONL layer writes and `troupe trace` reads.
//!
//! One definition for both sides, so a field the writer adds is a field the reader sees.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One line of a trace file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceLine {
    /// A closed span.
    Span(SpanLine),
    /// A warning or error logged outside any span.
    Event(EventLine),
}

/// A closed span, as written to the trace file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanLine {
    /// The span's name (`invoke_agent`, `chat`, `execute_tool`, …).
    pub name: String,
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits, unique in the file.
    pub span_id: String,
    /// The enclosing span's id; `None` for a root.
    pub parent_span_id: Option<String>,
    /// Start, in nanoseconds since the Unix epoch.
    pub start_time_unix_nano: u64,
    /// End, in nanoseconds since the Unix epoch.
    pub end_time_unix_nano: u64,
    /// `end - start` in milliseconds.
    pub duration_ms: f64,
    /// The `tracing` target (module path) that opened the span.
    pub target: String,
    /// The span's level.
    pub level: String,
    /// `error` when the span logged an error (an ERROR event, or any event with an `error`
    /// field) or recorded `error.type` / `otel.status_code = "ERROR"`; `ok` otherwise.
    pub status: String,
    /// Every recorded field.
    pub attributes: Map<String, Value>,
    /// Warning and error events logged inside the span, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventLine>,
}

/// A warning or error event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    /// When, in nanoseconds since the Unix epoch.
    pub time_unix_nano: u64,
    /// `WARN` or `ERROR`.
    pub level: String,
    /// The event's message.
    pub message: String,
    /// Its other fields.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub attributes: Map<String, Value>,
    /// The trace it belongs to, for events outside any span that still know one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

impl EventLine {
    /// Whether this event reports an error.
    pub fn is_error(&self) -> bool {
        self.level == "ERROR" || self.attributes.contains_key("error")
    }
}
