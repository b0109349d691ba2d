//! OpenAI-format transcripts on disk, and the file ledger reconstructed from their tool calls.
//!
//! A transcript recorded elsewhere has no troupe ledger; its tool calls still say which files
//! were read and changed, which is what compaction's stubs and file lists need.

use std::borrow::Borrow;

use serde_json::Value;
use troupe_protocol::{ChatMessage, Role};
use troupe_protocol::{FileAccess, FileLedger, LedgerEntry};

mod envelope;

use envelope::EnvelopedMessages;
pub use envelope::{Envelope, EnvelopeWith};

/// A transcript as read: `{"messages": [...]}` with every other top-level key kept exactly
/// (its [`Envelope`]), or a bare array of messages. The one reader of transcript text: the
/// CLI's `troupe compact`/`expand` (which also keep the file's layout), the evaluation and the
/// benches read through it.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The top-level keys beside `messages` (`source`, `license`, `tools`, `model`, …), kept
    /// as read; empty for a bare array.
    pub envelope: Envelope,
    /// The messages in the OpenAI Chat Completions shape.
    pub messages: Vec<ChatMessage>,
    /// Whether the text was a bare message array rather than an object.
    pub bare_array: bool,
}

/// Why a transcript could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// Neither `{"messages": [...]}` nor a bare message array.
    #[error(
        "not an OpenAI-format transcript (expected {{\"messages\": [...]}} or a message array): {0}"
    )]
    Format(#[from] serde_json::Error),
}

/// The UTF-8 byte order mark some editors put at the start of a file.
pub const BYTE_ORDER_MARK: char = '\u{feff}';

/// Parse a transcript: an object with `messages` (every other key kept in its [`Envelope`]; a
/// second `messages` is refused: which conversation would it be?), or a bare array of messages.
///
/// A leading byte order mark is skipped (JSON forbids it, but editors on Windows write it).
///
/// # Errors
/// [`TranscriptError::Format`] for text that is neither.
pub fn parse_transcript(json: &str) -> Result<Transcript, TranscriptError> {
    let json = json.strip_prefix(BYTE_ORDER_MARK).unwrap_or(json);
    if json.trim_start().starts_with('[') {
        return Ok(Transcript {
            envelope: Envelope::default(),
            messages: serde_json::from_str(json)?,
            bare_array: true,
        });
    }
    let read: EnvelopedMessages = serde_json::from_str(json)?;
    Ok(Transcript {
        envelope: read.envelope,
        messages: read.messages,
        bare_array: false,
    })
}

/// A file a tool call touched: its path, what was done, and the line range when known.
pub(crate) type CallFileAccess = (String, FileAccess, Option<(usize, usize)>);

/// What a tool call did to which file, judged from its name and arguments.
///
/// `read`/`read_file`/`view`/`open` read; `write`/`write_file`/`create` write;
/// `edit`/`edit_file`/`str_replace`/`insert` edit; `str_replace_editor` by its `command`.
/// The path comes from `path`, `file_path`, `filename` or `file_name`.
pub(crate) fn file_access_for_call(tool: &str, arguments: &Value) -> Option<CallFileAccess> {
    let path = ["path", "file_path", "filename", "file_name"]
        .iter()
        .find_map(|k| arguments.get(*k).and_then(Value::as_str))?
        .to_string();
    let access = match tool {
        "read" | "read_file" | "view" | "open" => FileAccess::Read,
        "write" | "write_file" | "create" => FileAccess::Written,
        "edit" | "edit_file" | "str_replace" | "insert" => FileAccess::Edited,
        "str_replace_editor" => match arguments.get("command").and_then(Value::as_str) {
            Some("view") => FileAccess::Read,
            Some("create") => FileAccess::Written,
            _ => FileAccess::Edited,
        },
        _ => return None,
    };
    Some((path, access, line_range(arguments)))
}

/// A line range from `view_range: [a, b]` or `offset`/`limit` arguments.
fn line_range(arguments: &Value) -> Option<(usize, usize)> {
    let as_line = |v: &Value| v.as_u64().map(|n| n as usize);
    if let Some([start, end]) = arguments
        .get("view_range")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        let start = as_line(start)?;
        let end = as_line(end).filter(|e| *e >= start)?;
        return Some((start, end));
    }
    let offset = arguments.get("offset").and_then(as_line)?;
    let limit = arguments
        .get("limit")
        .and_then(as_line)
        .filter(|l| *l > 0)?;
    Some((offset, offset + limit - 1))
}

/// The file ledger implied by a transcript's tool calls (one entry per file-touching call,
/// linked to the call id; whole-file reads get the line count of their result).
///
/// Takes a transcript's messages owned or shared (a conversation's `messages()`).
pub fn ledger_from_transcript<M: Borrow<ChatMessage>>(messages: &[M]) -> FileLedger {
    let mut ledger = FileLedger::new();
    for (i, message) in messages.iter().map(Borrow::borrow).enumerate() {
        for call in message.calls() {
            let Ok(arguments) = serde_json::from_str::<Value>(&call.function.arguments) else {
                continue;
            };
            let Some((path, access, lines)) = file_access_for_call(&call.function.name, &arguments)
            else {
                continue;
            };
            let mut entry = LedgerEntry::new(path, access).with_call(call.id.clone());
            // Transcripts carry no timestamps; 0 keeps the ledger deterministic.
            entry.at_ms = 0;
            if let Some((start, end)) = lines {
                entry = entry.with_lines(start, end);
            } else if access == FileAccess::Read {
                let result = messages[i + 1..]
                    .iter()
                    .map(Borrow::borrow)
                    .take_while(|m| m.role == Role::Tool)
                    .find(|m| m.tool_call_id.as_deref() == Some(call.id.as_str()));
                if let Some(result) = result {
                    entry = entry.with_line_count(result.text().lines().count());
                }
            }
            ledger.record(entry);
        }
    }
    ledger
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_protocol::ToolCall;

    #[test]
    fn builds_ledger_from_calls() {
        let messages = vec![
            ChatMessage::assistant_tool_calls(
                None,
                vec![
                    ToolCall::new("a", "read", r#"{"path":"src/a.rs"}"#),
                    ToolCall::new(
                        "b",
                        "str_replace_editor",
                        r#"{"command":"view","path":"/r/b.py","view_range":[3,9]}"#,
                    ),
                    ToolCall::new(
                        "c",
                        "edit",
                        r#"{"file_path":"src/c.rs","oldText":"x","newText":"y"}"#,
                    ),
                    ToolCall::new("d", "bash", r#"{"command":"cat src/d.rs"}"#),
                    ToolCall::new("e", "write", "not json"),
                ],
            ),
            ChatMessage::tool_result("a", "1\n2\n3"),
            ChatMessage::tool_result("b", "..."),
            ChatMessage::tool_result("c", "ok"),
            ChatMessage::tool_result("d", "..."),
            ChatMessage::tool_result("e", "..."),
        ];
        let ledger = ledger_from_transcript(&messages);
        assert_eq!(ledger.entries().len(), 3);
        let a = ledger.for_call("a").next().unwrap();
        assert_eq!((a.access, a.line_count), (FileAccess::Read, Some(3)));
        let b = ledger.for_call("b").next().unwrap();
        assert_eq!((b.path.as_str(), b.lines), ("/r/b.py", Some((3, 9))));
        assert_eq!(
            ledger.modified_files().into_iter().collect::<Vec<_>>(),
            ["src/c.rs"]
        );
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped() {
        let with_mark =
            parse_transcript("\u{feff}[{\"role\":\"user\",\"content\":\"hi\"}]").unwrap();
        assert_eq!(with_mark.messages, vec![ChatMessage::user("hi")]);
        let object = parse_transcript("\u{feff}{\"messages\":[]}").unwrap();
        assert!(object.messages.is_empty());
    }

    #[test]
    fn a_leading_developer_message_is_protected_like_a_system_prompt() {
        let t = parse_transcript(
            r#"[{"role":"developer","content":"be terse"},{"role":"user","content":"hi"},
                {"role":"assistant","content":"a"},{"role":"user","content":"b"}]"#,
        )
        .unwrap();
        let c = troupe_protocol::Conversation::from_messages(t.messages);
        let protected = crate::protection::ProtectedSet::compute(&c.to_messages(), 0);
        assert_eq!(
            protected.reason(c.messages()[0].id),
            Some(crate::protection::ProtectionReason::SystemPrompt)
        );
        assert_eq!(c.system_prompt().map(|m| m.role), Some(Role::Developer));
    }

    #[test]
    fn parses_object_and_array_forms() {
        let object =
            parse_transcript(r#"{"source":"x","messages":[{"role":"user","content":"hi"}]}"#)
                .unwrap();
        let array = parse_transcript(r#"[{"role":"user","content":"hi"}]"#).unwrap();
        assert_eq!(object.messages, array.messages);
        assert!(!object.bare_array && array.bare_array);
        assert_eq!(
            object.envelope.get("source").map(|v| v.to_string()),
            Some("\"x\"".into())
        );
        assert!(parse_transcript("{}").is_err());
        // Two conversations in one file: neither is the transcript.
        assert!(parse_transcript(r#"{"messages":[],"messages":[]}"#).is_err());
    }
}
