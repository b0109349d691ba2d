//! The envelope of a transcript file: every top-level key beside `messages`, kept as read.
//!
//! `{"messages": [...]}` is only the minimum; files carry `source`, `license`, `tools`, `model`,
//! `meta` and whatever else their writer needed. All of it is the user's data, so it is read
//! whole — every key with its value exactly as read (numbers by their text, nested key order
//! kept: see [`WireValue`]) and its place around `messages` — for a writer that gives the exact
//! file back (`troupe compact`, `troupe expand`: [`EnvelopeWith`]).

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use troupe_protocol::{ChatMessage, WireValue};

/// The top-level keys of a transcript object other than `messages`, in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Envelope {
    /// Every key other than `messages` with its value, in the order read; a repeated key is
    /// kept as read.
    pub fields: Vec<(String, WireValue)>,
    /// How many of `fields` came before `messages` (the rest follow it).
    pub messages_at: usize,
}

impl Envelope {
    /// The (first) value of `key`.
    pub fn get(&self, key: &str) -> Option<&WireValue> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// A transcript object as read: its envelope and its messages.
pub(super) struct EnvelopedMessages {
    pub(super) envelope: Envelope,
    pub(super) messages: Vec<ChatMessage>,
}

impl<'de> Deserialize<'de> for EnvelopedMessages {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = EnvelopedMessages;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with a `messages` array")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EnvelopedMessages, A::Error> {
        let mut envelope = Envelope::default();
        let mut messages = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "messages" {
                if messages.is_some() {
                    // Which of two conversations is the transcript? Neither guess is safe.
                    return Err(de::Error::duplicate_field("messages"));
                }
                messages = Some(map.next_value::<Vec<ChatMessage>>()?);
                envelope.messages_at = envelope.fields.len();
            } else {
                let value = map.next_value::<WireValue>()?;
                envelope.fields.push((key, value));
            }
        }
        let messages = messages.ok_or_else(|| de::Error::missing_field("messages"))?;
        Ok(EnvelopedMessages { envelope, messages })
    }
}

/// A transcript object to write: the envelope's keys around `messages`, in their order.
pub struct EnvelopeWith<'a, M: Serialize> {
    /// The envelope as read.
    pub envelope: &'a Envelope,
    /// The messages to write in its place.
    pub messages: M,
}

impl<M: Serialize> Serialize for EnvelopeWith<'_, M> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let fields = &self.envelope.fields;
        let at = self.envelope.messages_at.min(fields.len());
        let (before, after) = fields.split_at(at);
        let mut map = ser.serialize_map(Some(fields.len() + 1))?;
        for (k, v) in before {
            map.serialize_entry(k, v)?;
        }
        map.serialize_entry("messages", &self.messages)?;
        for (k, v) in after {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}
