//! Console logs (stderr) with the trace file's redaction: the `fmt` layer formats every event's
//! and span's fields through [`RedactedFields`], so a provider error that echoes a key is logged
//! without it. Message-content fields stay out of the console whatever `TROUPE_TRACE_CONTENT`
//! says: they are for traces.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::Writer;

use super::fields::is_content_name;
use super::redact::{REDACTED, is_secret_name, redact_value};

/// Formats fields like `tracing_subscriber`'s default (`message name=value name=value`), with
/// credential-named fields replaced by [`REDACTED`] and credentials in values redacted. Use it
/// with `fmt::layer().fmt_fields(RedactedFields)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedactedFields;

impl<'writer> MakeVisitor<Writer<'writer>> for RedactedFields {
    type Visitor = RedactingVisitor<'writer>;

    fn make_visitor(&self, target: Writer<'writer>) -> Self::Visitor {
        RedactingVisitor {
            writer: target,
            empty: true,
            result: Ok(()),
        }
    }
}

/// Writes one event's or span's fields, redacted (made by [`RedactedFields`]).
#[derive(Debug)]
pub struct RedactingVisitor<'writer> {
    writer: Writer<'writer>,
    /// Nothing written yet, so no separator is due.
    empty: bool,
    result: fmt::Result,
}

impl RedactingVisitor<'_> {
    fn write(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        let name = field.name();
        // `log` records carry their metadata as `log.*` fields; the default formatter skips them.
        // Message content (recorded for traces when asked for) would repeat the whole
        // conversation on every log line inside a `chat` span: it goes to traces only.
        if name.starts_with("log.") || is_content_name(name) {
            return;
        }
        let separator = if self.empty { "" } else { " " };
        self.empty = false;
        self.result = if name == "message" {
            write!(self.writer, "{separator}{}", redact_value(value))
        } else if is_secret_name(name) {
            write!(self.writer, "{separator}{name}={REDACTED}")
        } else {
            write!(self.writer, "{separator}{name}={}", redact_value(value))
        };
    }
}

impl Visit for RedactingVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.write(field, value);
        } else {
            // Redacted before quoting, so a JSON body is matched as written, not as escaped.
            self.write(field, &format!("{:?}", redact_value(value)));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.write(field, &value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.write(field, &format!("{value:?}"));
    }
}

impl VisitOutput<fmt::Result> for RedactingVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for RedactingVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn console_lines_are_redacted_and_keep_their_message() {
        let buffer = Buffer::default();
        let sink = buffer.clone();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(RedactedFields)
            .with_ansi(false)
            .with_writer(move || sink.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                "chat",
                api_key = "SECRET-span-key",
                model = "m1",
                "gen_ai.input.messages" = "the whole conversation",
            );
            let _entered = span.enter();
            tracing::warn!(
                error = "status 401: Bearer SECRET-bearer-99 rejected",
                attempt = 2_u64,
                "model call failed; key sk-SECRETsecret123 is invalid"
            );
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
        assert!(
            text.contains("model call failed; key [redacted] is invalid"),
            "{text}"
        );
        assert!(text.contains("status 401"), "{text}");
        assert!(text.contains("attempt=2"), "{text}");
        assert!(text.contains("api_key=[redacted]"), "{text}");
        assert!(text.contains("model=\"m1\""), "{text}");
        assert!(!text.contains("the whole conversation"), "{text}");
    }
}
