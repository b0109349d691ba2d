//! JSON values kept exactly as they came off the wire, for the fields troupe does not interpret.
//!
//! `serde_json::Value` cannot hold what providers and tools really write: an integer beyond
//! 64 bits becomes an `f64` (`123456789012345678901234567890` comes back as
//! `1.2345678901234568e29`), `1.50` comes back as `1.5`, and `1e400` is refused. A transcript
//! must come back as it was read, so unknown fields are kept as a [`WireValue`]: a tree whose
//! objects keep their key order and whose numbers keep their exact text.
//!
//! Why a tree and not a `Box<RawValue>` per field: a raw value also keeps the original
//! whitespace, so a pretty-printed extra field would carry newlines into one-line JSONL records
//! (session logs, archives), and a compact one would break the layout of a pretty file. Only the
//! number leaves are raw; the structure is re-formatted by whichever writer writes it. Why not
//! serde_json's `arbitrary_precision`: it changes every number in the process into a map
//! when serde buffers input (internally tagged enums such as `SessionRecord`, `#[serde(flatten)]`,
//! untagged enums), so typed integer fields there stop deserializing.

use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Number, Value};

/// The newtype name under which serde_json (with its `raw_value` feature) hands a deserializer
/// the exact text of the next value instead of parsing it; this is how `Box<RawValue>` itself
/// is deserialized. Other deserializers ignore the name, and the value is read as a tree.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// serde_json's own nesting limit. Each level of a [`WireValue`] is parsed from its raw text by a
/// fresh parser, so the limit is checked here, before deep input could exhaust the stack.
const MAX_DEPTH: usize = 128;

/// A JSON value as it appeared on the wire: object key order and number text are kept.
#[derive(Debug, Clone, PartialEq)]
pub enum WireValue {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, by its exact text.
    Number(WireNumber),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<WireValue>),
    /// An object, keys in their original order.
    Object(WireFields),
}

/// A JSON number by its exact text (`1.0`, `1e400` and 30-digit integers stay as written).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WireNumber(String);

impl WireNumber {
    /// The number's text, as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WireNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An ordered set of JSON object fields: the unknown fields of a message, a tool call or a
/// function, and the objects inside them.
///
/// Keys keep the order they were read in; a repeated key is kept as read (lookups see the first).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WireFields(Vec<(String, WireValue)>);

impl WireFields {
    /// No fields.
    pub fn new() -> Self {
        WireFields(Vec::new())
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&WireValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Set `key` to `value`: in place when the key is present (its old value is returned),
    /// otherwise appended last.
    pub fn insert(
        &mut self,
        key: impl Into<String>,
        value: impl Into<WireValue>,
    ) -> Option<WireValue> {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => Some(std::mem::replace(slot, value)),
            None => {
                self.0.push((key, value));
                None
            }
        }
    }

    /// Remove `key` (every occurrence), returning its first value.
    pub fn remove(&mut self, key: &str) -> Option<WireValue> {
        let first = self.0.iter().position(|(k, _)| k == key)?;
        let (_, value) = self.0.remove(first);
        self.0.retain(|(k, _)| k != key);
        Some(value)
    }

    /// The fields in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &WireValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Append a field as read, even when the key is already present (deserialization only).
    pub(crate) fn push_as_read(&mut self, key: String, value: WireValue) {
        self.0.push((key, value));
    }
}

impl WireValue {
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            WireValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The nearest `serde_json::Value`. Numbers that `Value` cannot hold exactly are approximated
    /// (an integer beyond 64 bits becomes an `f64`), and one beyond `f64`'s range becomes `null`.
    pub fn to_value(&self) -> Value {
        match self {
            WireValue::Null => Value::Null,
            WireValue::Bool(b) => Value::Bool(*b),
            WireValue::Number(n) => {
                serde_json::from_str::<Number>(n.as_str()).map_or(Value::Null, Value::Number)
            }
            WireValue::String(s) => Value::String(s.clone()),
            WireValue::Array(items) => {
                Value::Array(items.iter().map(WireValue::to_value).collect())
            }
            WireValue::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect(),
            ),
        }
    }

    /// Parse the exact text of one JSON value (already validated by serde_json).
    fn from_raw<E: de::Error>(raw: &str) -> Result<Self, E> {
        let raw = raw.trim();
        if raw.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
            return Ok(WireValue::Number(WireNumber(raw.to_string())));
        }
        let depth = nesting_depth(raw);
        if depth > MAX_DEPTH {
            return Err(E::custom(format!(
                "a value nested {depth} levels deep (more than {MAX_DEPTH})"
            )));
        }
        // Containers and scalars are read as a tree; their children come back here raw.
        let mut d = serde_json::Deserializer::from_str(raw);
        d.deserialize_any(TreeVisitor).map_err(E::custom)
    }
}

impl From<Value> for WireValue {
    fn from(value: Value) -> Self {
        match value {
            Value::Null => WireValue::Null,
            Value::Bool(b) => WireValue::Bool(b),
            Value::Number(n) => WireValue::Number(WireNumber(n.to_string())),
            Value::String(s) => WireValue::String(s),
            Value::Array(items) => WireValue::Array(items.into_iter().map(Into::into).collect()),
            Value::Object(map) => WireValue::Object(WireFields(
                map.into_iter().map(|(k, v)| (k, v.into())).collect(),
            )),
        }
    }
}

impl From<String> for WireValue {
    fn from(s: String) -> Self {
        WireValue::String(s)
    }
}

impl From<&str> for WireValue {
    fn from(s: &str) -> Self {
        WireValue::String(s.to_string())
    }
}

/// Compact JSON text, numbers as written.
impl fmt::Display for WireValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

impl Serialize for WireNumber {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // A number serde_json's `Number` writes back identically goes out as a plain number, so
        // every serializer (including `serde_json::to_value`) sees an ordinary number. Anything
        // else goes out as raw text, which serde_json's writers copy verbatim.
        let exact = serde_json::from_str::<Number>(&self.0)
            .ok()
            .filter(|n| n.to_string() == self.0);
        if let Some(n) = exact {
            return n.serialize(s);
        }
        RawValue::from_string(self.0.clone())
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl Serialize for WireValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            WireValue::Null => s.serialize_unit(),
            WireValue::Bool(b) => s.serialize_bool(*b),
            WireValue::Number(n) => n.serialize(s),
            WireValue::String(text) => s.serialize_str(text),
            WireValue::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            WireValue::Object(fields) => fields.serialize(s),
        }
    }
}

impl Serialize for WireFields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for WireValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_newtype_struct(RAW_VALUE_TOKEN, RawOrTreeVisitor)
    }
}

/// Accepts serde_json's raw text of a value, or — from any other deserializer, e.g. the buffer
/// serde uses for internally tagged enums — the value itself.
struct RawOrTreeVisitor;

impl<'de> Visitor<'de> for RawOrTreeVisitor {
    type Value = WireValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireValue, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Ok(WireValue::Object(WireFields::new()));
        };
        if first == RAW_VALUE_TOKEN {
            let raw: std::borrow::Cow<'de, str> = map.next_value::<CowStr<'de>>()?.0;
            return WireValue::from_raw(&raw);
        }
        let mut fields = WireFields::new();
        fields.push_as_read(first, map.next_value()?);
        read_fields(map, fields)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<WireValue, D::Error> {
        d.deserialize_any(TreeVisitor)
    }

    fn visit_unit<E: de::Error>(self) -> Result<WireValue, E> {
        TreeVisitor.visit_unit()
    }

    fn visit_none<E: de::Error>(self) -> Result<WireValue, E> {
        TreeVisitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<WireValue, D::Error> {
        WireValue::deserialize(d)
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<WireValue, E> {
        TreeVisitor.visit_bool(b)
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<WireValue, E> {
        TreeVisitor.visit_i64(n)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<WireValue, E> {
        TreeVisitor.visit_u64(n)
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<WireValue, E> {
        TreeVisitor.visit_f64(n)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<WireValue, E> {
        TreeVisitor.visit_str(s)
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<WireValue, E> {
        TreeVisitor.visit_string(s)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<WireValue, A::Error> {
        TreeVisitor.visit_seq(seq)
    }
}

/// A string that may borrow from the input (serde_json hands raw text over borrowed or owned).
struct CowStr<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for CowStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CowVisitor;
        impl<'de> Visitor<'de> for CowVisitor {
            type Value = CowStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("raw JSON text")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<CowStr<'de>, E> {
                Ok(CowStr(std::borrow::Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<CowStr<'de>, E> {
                Ok(CowStr(std::borrow::Cow::Owned(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<CowStr<'de>, E> {
                Ok(CowStr(std::borrow::Cow::Owned(s)))
            }
        }
        d.deserialize_str(CowVisitor)
    }
}

/// Builds a [`WireValue`] from a value's structure; children are read as [`WireValue`]s again,
/// so from serde_json each child arrives as exact text.
struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = WireValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<WireValue, E> {
        Ok(WireValue::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<WireValue, E> {
        Ok(WireValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<WireValue, D::Error> {
        WireValue::deserialize(d)
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<WireValue, E> {
        Ok(WireValue::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<WireValue, E> {
        Ok(WireValue::Number(WireNumber(n.to_string())))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<WireValue, E> {
        Ok(WireValue::Number(WireNumber(n.to_string())))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<WireValue, E> {
        Number::from_f64(n)
            .map(|n| WireValue::Number(WireNumber(n.to_string())))
            .ok_or_else(|| E::custom(format!("{n} is not a JSON number")))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<WireValue, E> {
        Ok(WireValue::String(s.to_string()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<WireValue, E> {
        Ok(WireValue::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WireValue, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(WireValue::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<WireValue, A::Error> {
        read_fields(map, WireFields::new())
    }
}

fn read_fields<'de, A: MapAccess<'de>>(
    mut map: A,
    mut fields: WireFields,
) -> Result<WireValue, A::Error> {
    while let Some(key) = map.next_key::<String>()? {
        fields.push_as_read(key, map.next_value()?);
    }
    Ok(WireValue::Object(fields))
}

/// How deeply arrays and objects nest in valid JSON text (brackets inside strings don't count).
fn nesting_depth(raw: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in raw.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}
