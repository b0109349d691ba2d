//! The JSON Schema subset the converter understands, as typed nodes, and the reading of a JSON
//! schema into them: a port of llama.cpp's `common/json-schema.cpp` (the version llama-cpp-sys-2
//! 0.1.161 vendors). Which keyword wins when several are present, how a `type` array expands, how
//! fractional and exclusive integer bounds round, and which schemas are refused all follow it, so
//! that the grammar built from a schema is the one llama.cpp would build.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::SchemaGrammarError;

/// A `format` the converter has a grammar for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StringFormat {
    None,
    /// `uuid`, `uuid1` .. `uuid5`.
    Uuid,
    Date,
    Time,
    DateTime,
}

/// One object property, in schema order.
#[derive(Debug)]
pub(super) struct Property {
    pub(super) name: String,
    pub(super) schema: Node,
    pub(super) required: bool,
}

/// One schema node. Counts are `i32` and bounds `i64` as in llama.cpp, with `-1` (counts) and
/// `i64::MIN` / `i64::MAX` (bounds) for "none".
#[derive(Debug)]
pub(super) enum Node {
    Any,
    /// `{"$ref": "#/..."}`: the target is the document's `refs` entry of this key.
    Ref(String),
    /// `oneOf` / `anyOf`, or a `type` array expanded to one alternative per type.
    AnyOf(Vec<Node>),
    AllOf(Vec<Node>),
    Const(Value),
    Enum(Vec<Value>),
    Null,
    Boolean,
    Number,
    /// Inclusive bounds, `exclusiveMinimum` / `exclusiveMaximum` folded in.
    Integer {
        minimum: i64,
        maximum: i64,
    },
    String {
        /// Empty when absent (an empty pattern is no pattern, as in llama.cpp).
        pattern: String,
        format: StringFormat,
        min_length: i32,
        max_length: i32,
    },
    Array {
        /// `Any` when `items` is absent.
        items: Box<Node>,
        min_items: i32,
        max_items: i32,
    },
    Tuple(Vec<Node>),
    Object {
        properties: Vec<Property>,
        /// `None` when additional properties are not allowed.
        additional: Option<Box<Node>>,
    },
}

/// A schema read into nodes, with the target of every `$ref` it uses.
#[derive(Debug)]
pub(super) struct Document {
    pub(super) root: Node,
    pub(super) refs: BTreeMap<String, Node>,
}

impl Document {
    /// Read `schema`; an error when it falls outside the supported subset.
    pub(super) fn read(schema: &Value) -> Result<Self, SchemaGrammarError> {
        let mut builder = Builder {
            root: schema,
            refs: BTreeMap::new(),
        };
        let root = builder.node(schema, "#")?;
        let refs = builder
            .refs
            .into_iter()
            .filter_map(|(key, node)| node.map(|node| (key, node)))
            .collect();
        Ok(Self { root, refs })
    }
}

struct Builder<'a> {
    root: &'a Value,
    /// `None` while the target is being built, so that a cycle back to it stops there.
    refs: BTreeMap<String, Option<Node>>,
}

fn fail<T>(path: &str, message: impl Into<String>) -> Result<T, SchemaGrammarError> {
    Err(SchemaGrammarError::Schema {
        path: path.to_string(),
        message: message.into(),
    })
}

/// Whether a JSON number is an integer to nlohmann's json (which llama.cpp reads schemas with).
fn is_integer(value: &Value) -> bool {
    value.is_i64() || value.is_u64()
}

/// The integer as nlohmann's `get<int64_t>()` returns it (an unsigned one wraps, as its cast).
fn as_i64(value: &Value) -> i64 {
    match value.as_i64() {
        Some(n) => n,
        None => value.as_u64().map_or(0, |n| n as i64),
    }
}

fn as_object(value: &Value) -> Option<&Map<String, Value>> {
    value.as_object()
}

fn get_count(
    schema: &Map<String, Value>,
    key: &str,
    path: &str,
    default: i32,
) -> Result<i32, SchemaGrammarError> {
    let Some(value) = schema.get(key) else {
        return Ok(default);
    };
    // `get<int>()`: a C++ cast, which truncates a wider integer.
    let count = as_i64(value) as i32;
    if !is_integer(value) || count < 0 {
        return fail(path, format!("{key} must be a non-negative integer"));
    }
    Ok(count)
}

/// A fractional bound is rounded inwards, towards the integers it still admits.
fn get_bound(
    schema: &Map<String, Value>,
    key: &str,
    path: &str,
    round_up: bool,
) -> Result<i64, SchemaGrammarError> {
    let value = schema.get(key).unwrap_or(&Value::Null);
    if is_integer(value) {
        return Ok(as_i64(value));
    }
    let Some(d) = value.as_f64() else {
        return fail(path, format!("{key} must be a number"));
    };
    let rounded = if round_up { d.ceil() } else { d.floor() };
    // The C++ cast of an out-of-range double is what x86 gives: i64::MIN.
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&rounded) {
        return Ok(i64::MIN);
    }
    Ok(rounded as i64)
}

fn get_format(schema: &Map<String, Value>, path: &str) -> Result<StringFormat, SchemaGrammarError> {
    let Some(value) = schema.get("format") else {
        return Ok(StringFormat::None);
    };
    let Some(format) = value.as_str() else {
        return fail(path, "format must be a string");
    };
    Ok(match format {
        "date" => StringFormat::Date,
        "time" => StringFormat::Time,
        "date-time" => StringFormat::DateTime,
        "uuid" | "uuid1" | "uuid2" | "uuid3" | "uuid4" | "uuid5" => StringFormat::Uuid,
        _ => StringFormat::None,
    })
}

/// `std::stoull`: leading whitespace, a sign, then digits up to the first non-digit; `None` where
/// it throws (no digits, or out of range).
fn stoull(text: &str) -> Option<u64> {
    let text = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let digits: &str = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    let value: u64 = digits.parse().ok()?;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

impl<'a> Builder<'a> {
    fn resolve_ref(&self, reference: &str, path: &str) -> Result<&'a Value, SchemaGrammarError> {
        let mut target = self.root;
        let tokens: Vec<&str> = reference[1..].split('/').collect();
        for sel in tokens.iter().skip(1) {
            if let Some(next) = as_object(target).and_then(|object| object.get(*sel)) {
                target = next;
            } else if let Some(items) = target.as_array() {
                let index = stoull(sel).unwrap_or(items.len() as u64);
                match usize::try_from(index).ok().and_then(|i| items.get(i)) {
                    Some(next) => target = next,
                    None => {
                        return fail(
                            path,
                            format!("cannot resolve $ref {reference}, {sel} is out of range"),
                        );
                    }
                }
            } else {
                return fail(
                    path,
                    format!("cannot resolve $ref {reference}, {sel} not found"),
                );
            }
        }
        Ok(target)
    }

    fn reference(&mut self, value: &Value, path: &str) -> Result<Node, SchemaGrammarError> {
        let Some(reference) = value.as_str() else {
            return fail(path, "$ref must be a string");
        };
        if !reference.starts_with("#/") {
            return fail(
                path,
                format!(
                    "unsupported $ref {reference}, only references into the same document are supported"
                ),
            );
        }
        if !self.refs.contains_key(reference) {
            self.refs.insert(reference.to_string(), None);
            let target = self.resolve_ref(reference, path)?;
            let node = self.node(target, reference)?;
            self.refs.insert(reference.to_string(), Some(node));
        }
        Ok(Node::Ref(reference.to_string()))
    }

    fn alternatives(&mut self, alts: &Value, path: &str) -> Result<Vec<Node>, SchemaGrammarError> {
        let Some(alts) = alts.as_array() else {
            return fail(path, "must be an array of schemas");
        };
        if alts.is_empty() {
            return fail(path, "must not be empty");
        }
        alts.iter()
            .enumerate()
            .map(|(i, alt)| self.node(alt, &format!("{path}/{i}")))
            .collect()
    }

    fn object(
        &mut self,
        schema: &Map<String, Value>,
        path: &str,
    ) -> Result<Node, SchemaGrammarError> {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut properties = Vec::new();
        if let Some(props) = schema.get("properties") {
            let Some(props) = props.as_object() else {
                return fail(path, "properties must be an object");
            };
            for (name, prop) in props {
                let schema = self.node(prop, &format!("{path}/properties/{name}"))?;
                properties.push(Property {
                    name: name.clone(),
                    schema,
                    required: required.contains(&name.as_str()),
                });
            }
        }
        let additional = match schema.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(Box::new(Node::Any)),
            Some(Value::Bool(false)) => None,
            Some(value @ Value::Object(_)) => Some(Box::new(
                self.node(value, &format!("{path}/additionalProperties"))?,
            )),
            Some(_) => return fail(path, "additionalProperties must be a boolean or a schema"),
            // {"type": "object"} on its own accepts any object
            None if !schema.contains_key("properties") => Some(Box::new(Node::Any)),
            None => None,
        };
        Ok(Node::Object {
            properties,
            additional,
        })
    }

    fn array(
        &mut self,
        schema: &Map<String, Value>,
        path: &str,
    ) -> Result<Node, SchemaGrammarError> {
        // "items" wins when both are present; a schema instead of an array is the item schema
        let key = if schema.contains_key("items") {
            Some("items")
        } else if schema.contains_key("prefixItems") {
            Some("prefixItems")
        } else {
            None
        };
        let items = match key.and_then(|key| schema.get(key).map(|items| (key, items))) {
            Some((key, Value::Array(items))) => {
                let items = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.node(item, &format!("{path}/{key}/{i}")))
                    .collect::<Result<_, _>>()?;
                return Ok(Node::Tuple(items));
            }
            Some((key, items)) => self.node(items, &format!("{path}/{key}"))?,
            None => Node::Any,
        };
        Ok(Node::Array {
            items: Box::new(items),
            min_items: get_count(schema, "minItems", path, 0)?,
            max_items: get_count(schema, "maxItems", path, -1)?,
        })
    }

    fn string(schema: &Map<String, Value>, path: &str) -> Result<Node, SchemaGrammarError> {
        let pattern = match schema.get("pattern") {
            None => String::new(),
            Some(Value::String(pattern)) => pattern.clone(),
            Some(_) => return fail(path, "pattern must be a string"),
        };
        Ok(Node::String {
            pattern,
            format: get_format(schema, path)?,
            min_length: get_count(schema, "minLength", path, 0)?,
            max_length: get_count(schema, "maxLength", path, -1)?,
        })
    }

    fn integer(schema: &Map<String, Value>, path: &str) -> Result<Node, SchemaGrammarError> {
        let mut minimum = i64::MIN;
        let mut maximum = i64::MAX;
        if schema.contains_key("minimum") {
            minimum = get_bound(schema, "minimum", path, true)?;
        } else if schema.contains_key("exclusiveMinimum") {
            minimum = get_bound(schema, "exclusiveMinimum", path, false)?.wrapping_add(1);
        }
        if schema.contains_key("maximum") {
            maximum = get_bound(schema, "maximum", path, false)?;
        } else if schema.contains_key("exclusiveMaximum") {
            maximum = get_bound(schema, "exclusiveMaximum", path, true)?.wrapping_sub(1);
        }
        Ok(Node::Integer { minimum, maximum })
    }

    fn node(&mut self, value: &Value, path: &str) -> Result<Node, SchemaGrammarError> {
        let Some(schema) = value.as_object() else {
            return fail(path, "schema must be an object");
        };
        if let Some(reference) = schema.get("$ref") {
            return self.reference(reference, path);
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(alts) = schema.get(key) {
                return Ok(Node::AnyOf(
                    self.alternatives(alts, &format!("{path}/{key}"))?,
                ));
            }
        }
        let kind = schema.get("type").unwrap_or(&Value::Null);
        if let Value::Array(types) = kind {
            // {"type": ["a", "b"], ...} is {"anyOf": [{"type": "a", ...}, {"type": "b", ...}]}
            if types.is_empty() {
                return fail(path, "type must not be empty");
            }
            let mut children = Vec::with_capacity(types.len());
            for (i, t) in types.iter().enumerate() {
                let mut alt = schema.clone();
                alt.insert("type".to_string(), t.clone());
                children.push(self.node(&Value::Object(alt), &format!("{path}/type/{i}"))?);
            }
            return Ok(Node::AnyOf(children));
        }
        if let Some(value) = schema.get("const") {
            return Ok(Node::Const(value.clone()));
        }
        if let Some(values) = schema.get("enum") {
            return match values.as_array() {
                Some(values) if !values.is_empty() => Ok(Node::Enum(values.clone())),
                _ => fail(path, "enum must be a non-empty array"),
            };
        }
        let type_name = match kind {
            Value::Null => "",
            Value::String(name) => name.as_str(),
            _ => return fail(path, "type must be a string or an array of strings"),
        };
        let has_properties = schema.contains_key("properties")
            || schema
                .get("additionalProperties")
                .is_some_and(|additional| additional != &Value::Bool(true));
        let all_of = |builder: &mut Self| -> Result<Node, SchemaGrammarError> {
            let alts = schema.get("allOf").unwrap_or(&Value::Null);
            Ok(Node::AllOf(
                builder.alternatives(alts, &format!("{path}/allOf"))?,
            ))
        };
        match type_name {
            "" => {
                // without a type the structural keywords decide, in the same order as the converter
                if has_properties {
                    self.object(schema, path)
                } else if schema.contains_key("allOf") {
                    all_of(self)
                } else if schema.contains_key("items") || schema.contains_key("prefixItems") {
                    self.array(schema, path)
                } else if schema.contains_key("pattern")
                    || schema.contains_key("minLength")
                    || schema.contains_key("maxLength")
                    || get_format(schema, path)? != StringFormat::None
                {
                    Self::string(schema, path)
                } else {
                    Ok(Node::Any)
                }
            }
            "object" if !has_properties && schema.contains_key("allOf") => all_of(self),
            "object" => self.object(schema, path),
            "string" if schema.contains_key("allOf") => all_of(self),
            "string" => Self::string(schema, path),
            "array" => self.array(schema, path),
            "integer" => Self::integer(schema, path),
            "number" => Ok(Node::Number),
            "boolean" => Ok(Node::Boolean),
            "null" => Ok(Node::Null),
            other => fail(path, format!("unrecognized type {other}")),
        }
    }
}
