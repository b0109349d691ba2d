//! Turning `tracing` fields into JSON attributes, with secrets redacted and message content kept
//! out unless it was asked for.

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use troupe_protocol::trace::semconv;

use super::redact::{REDACTED, is_secret_name, redact_value};

/// Attribute-name prefixes that carry message content (prompts, completions, tool arguments and
/// results): written only when content recording is on (`TROUPE_TRACE_CONTENT=1`).
pub const CONTENT_PREFIXES: &[&str] = &[
    semconv::INPUT_MESSAGES,
    semconv::OUTPUT_MESSAGES,
    semconv::SYSTEM_INSTRUCTIONS,
    semconv::LEGACY_PROMPT,
    semconv::LEGACY_COMPLETION,
    semconv::TOOL_CALL_ARGUMENTS,
    semconv::TOOL_CALL_RESULT,
    semconv::CONTENT,
];

/// Whether an attribute with this name is message content.
pub fn is_content_name(name: &str) -> bool {
    CONTENT_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Collects fields into a JSON object, applying the redaction and content rules.
pub(crate) struct FieldCollector<'a> {
    pub(crate) fields: &'a mut Map<String, Value>,
    pub(crate) record_content: bool,
}

impl FieldCollector<'_> {
    fn put(&mut self, field: &Field, value: Value) {
        let name = field.name();
        if is_content_name(name) && !self.record_content {
            return;
        }
        let value = if is_secret_name(name) {
            Value::String(REDACTED.to_string())
        } else {
            match value {
                Value::String(s) => Value::String(redact_value(&s)),
                other => other,
            }
        };
        self.fields.insert(name.to_string(), value);
    }
}

impl Visit for FieldCollector<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(
            field,
            serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number),
        );
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
}
