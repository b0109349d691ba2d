//! Chat messages in the OpenAI Chat Completions shape, plus troupe's own metadata.
//!
//! The serde form of [`ChatMessage`] is exactly the OpenAI wire shape: a transcript read from disk
//! and written back is unchanged (unknown fields are kept in [`ChatMessage::extra`]). troupe's own
//! metadata — the stable [`MessageId`] and the [`MessageKind`] — never appears on the wire; it
//! travels in session records (see [`StoredMessage`]).
//!
//! What troupe does not interpret is kept as it came: unknown keys of a message, of a tool call
//! and of its `function` (as [`WireFields`], numbers by their exact text), `content` and
//! `tool_calls` absent vs `null`, and the `developer` role.

mod deserialize;
mod wire_value;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use wire_value::{WireFields, WireNumber, WireValue};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions that frame the whole conversation.
    System,
    /// OpenAI's newer name for system instructions; kept as written and treated like
    /// [`Role::System`] (see [`Role::is_instructions`]).
    Developer,
    /// The person (or calling agent) asking.
    User,
    /// The model's turn: text, tool calls, or both.
    Assistant,
    /// The result of one tool call.
    Tool,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Role {
    /// The role's name on the chat wire (`"system"`, `"user"`, …), without allocating.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Whether this role gives instructions that frame the conversation (`system` or
    /// `developer`): such a message leading a conversation is its system prompt.
    pub fn is_instructions(self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// A conversation-local, stable message id, written `m<N>`.
///
/// Ids are handed out by [`crate::Conversation::push`] and never reused within a conversation,
/// so compaction stubs and summaries can name the messages they replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MessageId(pub u64);

impl MessageId {
    /// The id of a message that has not been placed in a conversation yet.
    pub const UNASSIGNED: MessageId = MessageId(0);

    /// Whether a conversation has assigned this id.
    pub fn is_assigned(self) -> bool {
        self.0 != 0
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{}", self.0)
    }
}

/// The error for a string that is not a message id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a message id (expected m<number>, e.g. m12)")]
pub struct ParseMessageIdError(pub String);

impl FromStr for MessageId {
    type Err = ParseMessageIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digits = s.trim().strip_prefix('m').unwrap_or(s.trim());
        digits
            .parse::<u64>()
            .ok()
            .filter(|n| *n != 0)
            .map(MessageId)
            .ok_or_else(|| ParseMessageIdError(s.to_string()))
    }
}

impl Serialize for MessageId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What a message is to troupe, beyond its role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// An ordinary message of the conversation.
    #[default]
    Normal,
    /// A compaction summary that stands for older messages.
    Summary,
    /// A stand-in for an archived original: a tool result's stub or cut, or an answer cut to
    /// fit the window.
    CompressedStub,
    /// Shown to a person but never sent to a model; compaction drops these first.
    DisplayOnly,
}

/// Message content: a plain string (the common case) or an array of content parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts (`[{"type": "text", "text": …}, …]`), kept verbatim.
    Parts(Vec<Value>),
}

impl Content {
    /// The text of this content; text parts are joined with newlines, other parts skipped.
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// The function half of a tool call: a name and JSON-encoded arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them: a JSON document in a string (possibly malformed).
    pub arguments: String,
    /// Keys troupe does not interpret, kept verbatim.
    #[serde(flatten)]
    pub extra: WireFields,
}

/// One tool call requested by an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    /// The provider's id for this call; the tool result names it in `tool_call_id`.
    pub id: String,
    /// Always `"function"` in the Chat Completions API.
    #[serde(rename = "type")]
    pub kind: String,
    /// Which function to call, with which arguments.
    pub function: FunctionCall,
    /// Keys troupe does not interpret (e.g. Gemini's `extra_content` with its thought
    /// signature, which must go back to the provider unchanged), kept verbatim.
    #[serde(flatten)]
    pub extra: WireFields,
}

fn function_type() -> String {
    "function".to_string()
}

impl ToolCall {
    /// A function tool call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_type(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
                extra: WireFields::new(),
            },
            extra: WireFields::new(),
        }
    }
}

/// One message of a conversation.
///
/// `Deserialize` is written by hand (`message/deserialize.rs`) so that unknown keys keep their
/// exact text; serde's `flatten` would read them through a buffer that turns big integers into
/// floats.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its content: absent, `null`, or text/parts, written back the way it was read.
    #[serde(skip_serializing_if = "ContentSlot::is_absent")]
    pub content: ContentSlot,
    /// Tool calls requested by an assistant message: absent, `null`, or a list.
    #[serde(skip_serializing_if = "ToolCallsSlot::is_absent")]
    pub tool_calls: ToolCallsSlot,
    /// For a tool message: the id of the call it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Keys troupe does not interpret (`name`, `refusal`, `reasoning_content`, `model`, provider
    /// extensions), kept verbatim in their original order.
    #[serde(flatten)]
    pub extra: WireFields,
    /// troupe's stable id for this message (never on the wire).
    #[serde(skip)]
    pub id: MessageId,
    /// What this message is to troupe (never on the wire).
    #[serde(skip)]
    pub kind: MessageKind,
    /// Pinned: compaction never touches it, like the protected messages (a project's rules
    /// injected by the agent's spec, or a message a compaction hook pinned). Never on the wire.
    #[serde(skip)]
    pub pinned: bool,
}

/// The `content` field as it appeared on the wire: absent, `null`, or a value.
///
/// Keeping the difference is what makes transcripts round-trip byte-for-byte in meaning.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ContentSlot {
    /// The field was not present.
    #[default]
    Absent,
    /// The field was `null`.
    Null,
    /// The field held text or parts.
    Value(Content),
}

impl ContentSlot {
    fn is_absent(&self) -> bool {
        matches!(self, ContentSlot::Absent)
    }

    /// The content, if any.
    pub fn as_content(&self) -> Option<&Content> {
        match self {
            ContentSlot::Value(c) => Some(c),
            _ => None,
        }
    }
}

impl Serialize for ContentSlot {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ContentSlot::Absent | ContentSlot::Null => s.serialize_none(),
            ContentSlot::Value(c) => c.serialize(s),
        }
    }
}

/// The `tool_calls` field as it appeared on the wire: absent, `null`, or a list (possibly empty).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ToolCallsSlot {
    /// The field was not present.
    #[default]
    Absent,
    /// The field was `null` (some providers write this on every message).
    Null,
    /// The field held a list of calls.
    Calls(Vec<ToolCall>),
}

impl ToolCallsSlot {
    fn is_absent(&self) -> bool {
        matches!(self, ToolCallsSlot::Absent)
    }

    /// The calls (empty when absent or `null`).
    pub fn as_slice(&self) -> &[ToolCall] {
        match self {
            ToolCallsSlot::Calls(calls) => calls,
            ToolCallsSlot::Absent | ToolCallsSlot::Null => &[],
        }
    }
}

impl Serialize for ToolCallsSlot {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolCallsSlot::Absent | ToolCallsSlot::Null => s.serialize_none(),
            ToolCallsSlot::Calls(calls) => calls.serialize(s),
        }
    }
}

impl ChatMessage {
    fn new(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: ContentSlot::Value(Content::Text(content.into())),
            tool_calls: ToolCallsSlot::Absent,
            tool_call_id: None,
            extra: WireFields::new(),
            id: MessageId::UNASSIGNED,
            kind: MessageKind::Normal,
            pinned: false,
        }
    }

    /// This message, pinned: compaction keeps it byte-identical, like the protected messages.
    pub fn pinned(mut self) -> Self {
        self.pinned = true;
        self
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// An assistant message that requests tool calls (content `null` unless given).
    pub fn assistant_tool_calls(content: Option<String>, calls: Vec<ToolCall>) -> Self {
        let mut m = Self::new(Role::Assistant, String::new());
        m.content = content.map_or(ContentSlot::Null, |c| ContentSlot::Value(Content::Text(c)));
        m.tool_calls = ToolCallsSlot::Calls(calls);
        m
    }

    /// A tool result answering the call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        let mut m = Self::new(Role::Tool, content);
        m.tool_call_id = Some(tool_call_id.into());
        m
    }

    /// This message with a different kind.
    pub fn with_kind(mut self, kind: MessageKind) -> Self {
        self.kind = kind;
        self
    }

    /// The text of the content (empty when there is none).
    pub fn text(&self) -> String {
        self.text_cow().into_owned()
    }

    /// The text of the content, borrowed when it is plain text (the common case), joined as
    /// [`ChatMessage::text`] joins parts otherwise: for readers of long tool outputs that need
    /// no copy.
    pub fn text_cow(&self) -> std::borrow::Cow<'_, str> {
        match &self.content {
            ContentSlot::Value(Content::Text(text)) => std::borrow::Cow::Borrowed(text),
            ContentSlot::Value(parts) => std::borrow::Cow::Owned(parts.text()),
            ContentSlot::Absent | ContentSlot::Null => std::borrow::Cow::Borrowed(""),
        }
    }

    /// A copy of this message whose content is `text`, made without copying the content it
    /// replaces (a stub of a long output is built from the output's message).
    pub fn with_text(&self, text: impl Into<String>) -> Self {
        ChatMessage {
            role: self.role,
            content: ContentSlot::Value(Content::Text(text.into())),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            extra: self.extra.clone(),
            id: self.id,
            kind: self.kind,
            pinned: self.pinned,
        }
    }

    /// Replace the content with plain text.
    pub fn set_text(&mut self, text: impl Into<String>) {
        self.content = ContentSlot::Value(Content::Text(text.into()));
    }

    /// The tool calls of this message (empty for messages without any).
    pub fn calls(&self) -> &[ToolCall] {
        self.tool_calls.as_slice()
    }

    /// Whether this assistant message requests at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        !self.calls().is_empty()
    }
}

/// A message as troupe stores it in sessions and archives: wire shape plus id and kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// The message's conversation-local id (`m1`, `m2`, …), never reused.
    pub id: MessageId,
    /// What the message is to troupe beyond its wire role: normal, a summary, a compressed
    /// stub, or display-only.
    #[serde(default)]
    pub kind: MessageKind,
    /// Whether compaction must keep it byte-identical; written only when set, so logs of
    /// unpinned messages keep their bytes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pinned: bool,
    /// The message in the OpenAI shape.
    pub message: ChatMessage,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl From<&ChatMessage> for StoredMessage {
    fn from(m: &ChatMessage) -> Self {
        StoredMessage::from(m.clone())
    }
}

/// By value: a message leaving the conversation for an archive is stored without a copy.
impl From<ChatMessage> for StoredMessage {
    fn from(mut message: ChatMessage) -> Self {
        // The inner message carries only the wire shape, so a stored message compares equal to
        // itself after a JSON round trip (id and kind live in the outer fields).
        let (id, kind, pinned) = (message.id, message.kind, message.pinned);
        message.id = MessageId::UNASSIGNED;
        message.kind = MessageKind::Normal;
        message.pinned = false;
        StoredMessage {
            id,
            kind,
            pinned,
            message,
        }
    }
}

impl From<StoredMessage> for ChatMessage {
    fn from(s: StoredMessage) -> Self {
        let mut m = s.message;
        m.id = s.id;
        m.kind = s.kind;
        m.pinned = s.pinned;
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_absent_null_and_text_round_trip() {
        for raw in [
            r#"{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"x","arguments":"{}"}}]}"#,
            r#"{"role":"assistant","content":null}"#,
            r#"{"role":"user","content":"hi","name":"bob"}"#,
            r#"{"role":"user","content":[{"type":"text","text":"hi"}]}"#,
        ] {
            let v: Value = serde_json::from_str(raw).unwrap();
            let m: ChatMessage = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(serde_json::to_value(&m).unwrap(), v, "{raw}");
        }
    }

    #[test]
    fn stored_messages_survive_a_json_round_trip() {
        let mut m = ChatMessage::tool_result("c1", "out").with_kind(MessageKind::CompressedStub);
        m.id = MessageId(7);
        let stored = StoredMessage::from(&m);
        let back: StoredMessage =
            serde_json::from_str(&serde_json::to_string(&stored).unwrap()).unwrap();
        assert_eq!(back, stored);
        assert_eq!(ChatMessage::from(back), m);
    }

    #[test]
    fn unknown_fields_survive_serde_buffering_in_internally_tagged_records() {
        // Session records are an internally tagged enum: serde buffers the message before
        // reading it, so the raw-text path is not available and the tree path must take over.
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum Record {
            Message(StoredMessage),
        }
        let raw = r#"{"role":"developer","content":"x","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}","strict":true},"extra_content":{"google":{"thought_signature":"abc"}}}],"model":"m","n":[1,2.5,-3]}"#;
        let mut m: ChatMessage = serde_json::from_str(raw).unwrap();
        m.id = MessageId(3);
        let record = Record::Message(StoredMessage::from(&m));
        let text = serde_json::to_string(&record).unwrap();
        let back: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(back, record);
        let Record::Message(stored) = back;
        assert_eq!(serde_json::to_string(&stored.message).unwrap(), raw);
    }

    #[test]
    fn wire_values_convert_to_and_from_serde_json_values() {
        let m: ChatMessage = serde_json::from_str(
            r#"{"role":"user","name":"bob","n":123456789012345678901234567890,"x":1e400}"#,
        )
        .unwrap();
        assert_eq!(m.extra.get("name").and_then(WireValue::as_str), Some("bob"));
        assert_eq!(
            m.extra.get("n").unwrap().to_string(),
            "123456789012345678901234567890"
        );
        assert_eq!(m.extra.get("x").unwrap().to_value(), Value::Null);
        // A message with numbers `Value` can hold converts exactly (the OpenAI provider's path).
        let mut m = ChatMessage::user("hi");
        m.extra.insert("refusal", Value::String("no".into()));
        m.extra.insert("n", serde_json::json!({"k": [1, 2.5]}));
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            serde_json::json!({"role":"user","content":"hi","refusal":"no","n":{"k":[1,2.5]}})
        );
    }

    #[test]
    fn deeply_nested_unknown_fields_are_refused_not_overflowed() {
        let depth = 100_000;
        let raw = format!(
            r#"{{"role":"user","deep":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let err = serde_json::from_str::<ChatMessage>(&raw).unwrap_err();
        assert!(err.to_string().contains("nested"), "{err}");
        let ok = format!(
            r#"{{"role":"user","deep":{}{}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        );
        assert_eq!(
            serde_json::to_string(&serde_json::from_str::<ChatMessage>(&ok).unwrap()).unwrap(),
            ok
        );
    }

    #[test]
    fn message_ids_parse_and_reject() {
        assert_eq!("m12".parse::<MessageId>().unwrap(), MessageId(12));
        assert_eq!("7".parse::<MessageId>().unwrap(), MessageId(7));
        let err = "x1".parse::<MessageId>().unwrap_err();
        assert!(err.to_string().contains("x1"));
        assert!("m0".parse::<MessageId>().is_err());
    }

    #[test]
    fn a_pin_survives_the_stored_form_and_never_reaches_the_wire() {
        let mut m = ChatMessage::user("rules").pinned();
        m.id = MessageId(3);
        let stored = serde_json::to_string(&StoredMessage::from(&m)).unwrap();
        assert_eq!(
            stored,
            r#"{"id":"m3","kind":"normal","pinned":true,"message":{"role":"user","content":"rules"}}"#
        );
        let back: StoredMessage = serde_json::from_str(&stored).unwrap();
        assert_eq!(ChatMessage::from(back), m);
        // An unpinned message is stored as before pins existed.
        m.pinned = false;
        let plain = serde_json::to_string(&StoredMessage::from(&m)).unwrap();
        assert!(!plain.contains("pinned"), "{plain}");
    }
}
