//! Transcript files in the OpenAI message format, read and written back in the same layout.
//!
//! `troupe compact` and `troupe expand` promise the exact original file back, so writing keeps
//! what reading saw: the envelope (every top-level key beside `messages`, in its place and with
//! its value exactly as read — see [`Envelope`] — or a bare array), the indentation, the trailing newline, a leading byte order mark, and the conventional key order
//! of a message (`role`, `tool_call_id`, `content`, `tool_calls`, then any other keys in the
//! order they were read). Keys troupe does not interpret keep their values exactly, numbers
//! included (see `troupe_protocol::WireValue`).

use std::path::{Path, PathBuf};

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use troupe_compaction::transcript::{
    BYTE_ORDER_MARK, Envelope, EnvelopeWith, Transcript, parse_transcript,
};
use troupe_protocol::{ChatMessage, ContentSlot, ToolCallsSlot};

/// How a transcript file was laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Spaces per indentation level; `None` for a single-line file.
    pub indent: Option<usize>,
    /// Whether the file ended with a newline.
    pub trailing_newline: bool,
    /// A bare message array rather than `{"messages": [...]}`.
    pub bare_array: bool,
    /// Whether the file began with a UTF-8 byte order mark (written back when it did).
    pub byte_order_mark: bool,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            indent: Some(2),
            trailing_newline: true,
            bare_array: false,
            byte_order_mark: false,
        }
    }
}

/// A transcript file's content.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptFile {
    /// The top-level keys beside `messages` (`source`, `license`, `tools`, `model`, …), kept as
    /// read; empty for a bare array.
    pub envelope: Envelope,
    /// The conversation, in order, in the OpenAI message shape.
    pub messages: Vec<ChatMessage>,
    /// How to write it back.
    pub layout: Layout,
}

/// Why a transcript file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptFileError {
    /// I/O.
    #[error("{path}: {cause}")]
    Io {
        /// The transcript file's path.
        path: PathBuf,
        /// The read or write error.
        cause: std::io::Error,
    },
    /// Not a transcript.
    #[error("{path}: {cause}")]
    Format {
        /// The transcript file's path.
        path: PathBuf,
        /// What about its contents is not a transcript.
        cause: troupe_compaction::transcript::TranscriptError,
    },
    /// Could not serialize.
    #[error("cannot serialize the transcript: {0}")]
    Serialize(String),
}

fn sniff_layout(text: &str) -> Layout {
    let without_mark = text.strip_prefix(BYTE_ORDER_MARK);
    let byte_order_mark = without_mark.is_some();
    let text = without_mark.unwrap_or(text);
    let bare_array = text.trim_start().starts_with('[');
    let indent = text
        .lines()
        .nth(1)
        .map(|second| second.len() - second.trim_start_matches(' ').len())
        .filter(|n| *n > 0);
    Layout {
        indent,
        trailing_newline: text.ends_with('\n'),
        bare_array,
        byte_order_mark,
    }
}

impl TranscriptFile {
    /// Parse transcript text (`{"messages": [...]}` or a bare array, after an optional byte
    /// order mark).
    ///
    /// # Errors
    /// [`TranscriptFileError::Format`] naming `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, TranscriptFileError> {
        // Read by the one transcript reader; only the layout (indentation, newline, mark) is
        // this file's own.
        let Transcript {
            envelope, messages, ..
        } = parse_transcript(text).map_err(|cause| TranscriptFileError::Format {
            path: path.to_path_buf(),
            cause,
        })?;
        Ok(TranscriptFile {
            envelope,
            messages,
            layout: sniff_layout(text),
        })
    }

    /// Read a transcript file.
    ///
    /// # Errors
    /// [`TranscriptFileError`] when it cannot be read or is not a transcript.
    pub fn read(path: &Path) -> Result<Self, TranscriptFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TranscriptFileError::Io {
            path: path.to_path_buf(),
            cause: source,
        })?;
        Self::parse(path, &text)
    }

    /// The file's text in its layout.
    ///
    /// # Errors
    /// [`TranscriptFileError::Serialize`] (only for values serde cannot write).
    pub fn to_text(&self) -> Result<String, TranscriptFileError> {
        let messages: Vec<OrderedMessage<'_>> = self.messages.iter().map(OrderedMessage).collect();
        let mut out = Vec::new();
        let result = match self.layout.indent {
            Some(n) => {
                let indent = vec![b' '; n];
                let formatter = serde_json::ser::PrettyFormatter::with_indent(&indent);
                let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
                self.serialize_into(&messages, &mut ser)
            }
            None => self.serialize_into(&messages, &mut serde_json::Serializer::new(&mut out)),
        };
        result.map_err(|e| TranscriptFileError::Serialize(e.to_string()))?;
        let json =
            String::from_utf8(out).map_err(|e| TranscriptFileError::Serialize(e.to_string()))?;
        let mut text = String::with_capacity(json.len() + 4);
        if self.layout.byte_order_mark {
            text.push(BYTE_ORDER_MARK);
        }
        text.push_str(&json);
        if self.layout.trailing_newline {
            text.push('\n');
        }
        Ok(text)
    }

    fn serialize_into<S: Serializer>(
        &self,
        messages: &[OrderedMessage<'_>],
        ser: S,
    ) -> Result<S::Ok, S::Error> {
        if self.layout.bare_array {
            return messages.serialize(ser);
        }
        EnvelopeWith {
            envelope: &self.envelope,
            messages,
        }
        .serialize(ser)
    }

    /// Write the file in its layout, as [`crate::atomic_write::write_atomically`] does: a
    /// regular file is replaced atomically (a new one is private, `0o600`), a device or a FIFO
    /// with a reader is written to in place, anything else is refused.
    ///
    /// # Errors
    /// [`TranscriptFileError`] when it cannot be serialized or written.
    pub fn write(&self, path: &Path) -> Result<(), TranscriptFileError> {
        let text = self.to_text()?;
        crate::atomic_write::write_atomically(path, text.as_bytes()).map_err(|source| {
            TranscriptFileError::Io {
                path: path.to_path_buf(),
                cause: source,
            }
        })
    }
}

/// A message serialized with its keys in the conventional order.
struct OrderedMessage<'a>(&'a ChatMessage);

impl Serialize for OrderedMessage<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut map = ser.serialize_map(None)?;
        map.serialize_entry("role", &m.role)?;
        if let Some(id) = &m.tool_call_id {
            map.serialize_entry("tool_call_id", id)?;
        }
        match &m.content {
            ContentSlot::Absent => {}
            other => map.serialize_entry("content", other)?,
        }
        match &m.tool_calls {
            ToolCallsSlot::Absent => {}
            other => map.serialize_entry("tool_calls", other)?,
        }
        for (k, v) in m.extra.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_top_level_key_comes_back_in_its_place_with_its_value() {
        let text = concat!(
            r#"{"source":null,"tools":[{"b":1,"a":2}],"messages":[{"role":"user","content":"hi"}],"#,
            r#""model":"m","meta":{"n":123456789012345678901234567890,"f":1.50}}"#
        );
        let file = TranscriptFile::parse(Path::new("t.json"), text).unwrap();
        assert_eq!(file.messages.len(), 1);
        assert_eq!(file.envelope.messages_at, 2);
        assert_eq!(
            file.envelope.get("model").and_then(|v| v.as_str()),
            Some("m")
        );
        assert_eq!(file.to_text().unwrap(), text);
    }

    #[test]
    fn a_transcript_without_messages_or_with_two_is_refused() {
        for (text, why) in [
            (r#"{"model":"m"}"#, "missing field `messages`"),
            (
                r#"{"messages":[],"messages":[]}"#,
                "duplicate field `messages`",
            ),
            (r#""text""#, "an object with a `messages` array"),
        ] {
            let err = TranscriptFile::parse(Path::new("t.json"), text).unwrap_err();
            assert!(err.to_string().contains(why), "{text}: {err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_written_transcript_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let file = TranscriptFile::parse(Path::new("t.json"), "[]").unwrap();
        file.write(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
