//! Hand-written `Deserialize` for the wire types, so that unknown keys reach [`WireValue`]
//! straight from the parser (with their exact text) rather than through serde's `flatten`
//! buffer, and so that `content`/`tool_calls` keep absent apart from `null`.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{
    ChatMessage, Content, ContentSlot, FunctionCall, MessageId, MessageKind, Role, ToolCall,
    ToolCallsSlot, WireFields, WireValue, function_type,
};

/// Fill `slot` with the next value, refusing a key that appeared before.
fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    key: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(key));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

impl<'de> Deserialize<'de> for ChatMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ChatMessageVisitor)
    }
}

struct ChatMessageVisitor;

impl<'de> Visitor<'de> for ChatMessageVisitor {
    type Value = ChatMessage;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a chat message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ChatMessage, A::Error> {
        let mut role: Option<Role> = None;
        // Outer `Some`: the key was present; inner `None`: its value was `null`.
        let mut content: Option<Option<Content>> = None;
        let mut tool_calls: Option<Option<Vec<ToolCall>>> = None;
        let mut tool_call_id: Option<Option<String>> = None;
        let mut extra = WireFields::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "role" => once(&mut map, &mut role, "role")?,
                "content" => once(&mut map, &mut content, "content")?,
                "tool_calls" => once(&mut map, &mut tool_calls, "tool_calls")?,
                "tool_call_id" => once(&mut map, &mut tool_call_id, "tool_call_id")?,
                _ => {
                    let value: WireValue = map.next_value()?;
                    extra.push_as_read(key, value);
                }
            }
        }
        Ok(ChatMessage {
            role: role.ok_or_else(|| de::Error::missing_field("role"))?,
            content: match content {
                None => ContentSlot::Absent,
                Some(None) => ContentSlot::Null,
                Some(Some(c)) => ContentSlot::Value(c),
            },
            tool_calls: match tool_calls {
                None => ToolCallsSlot::Absent,
                Some(None) => ToolCallsSlot::Null,
                Some(Some(calls)) => ToolCallsSlot::Calls(calls),
            },
            tool_call_id: tool_call_id.flatten(),
            extra,
            id: MessageId::UNASSIGNED,
            kind: MessageKind::Normal,
            pinned: false,
        })
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ToolCallVisitor)
    }
}

struct ToolCallVisitor;

impl<'de> Visitor<'de> for ToolCallVisitor {
    type Value = ToolCall;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool call object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolCall, A::Error> {
        let mut id: Option<String> = None;
        let mut kind: Option<String> = None;
        let mut function: Option<FunctionCall> = None;
        let mut extra = WireFields::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "id" => once(&mut map, &mut id, "id")?,
                "type" => once(&mut map, &mut kind, "type")?,
                "function" => once(&mut map, &mut function, "function")?,
                _ => {
                    let value: WireValue = map.next_value()?;
                    extra.push_as_read(key, value);
                }
            }
        }
        Ok(ToolCall {
            id: id.ok_or_else(|| de::Error::missing_field("id"))?,
            kind: kind.unwrap_or_else(function_type),
            function: function.ok_or_else(|| de::Error::missing_field("function"))?,
            extra,
        })
    }
}

impl<'de> Deserialize<'de> for FunctionCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FunctionCallVisitor)
    }
}

struct FunctionCallVisitor;

impl<'de> Visitor<'de> for FunctionCallVisitor {
    type Value = FunctionCall;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a function object with `name` and `arguments`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FunctionCall, A::Error> {
        let mut name: Option<String> = None;
        let mut arguments: Option<String> = None;
        let mut extra = WireFields::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "name" => once(&mut map, &mut name, "name")?,
                "arguments" => once(&mut map, &mut arguments, "arguments")?,
                _ => {
                    let value: WireValue = map.next_value()?;
                    extra.push_as_read(key, value);
                }
            }
        }
        Ok(FunctionCall {
            name: name.ok_or_else(|| de::Error::missing_field("name"))?,
            arguments: arguments.ok_or_else(|| de::Error::missing_field("arguments"))?,
            extra,
        })
    }
}
