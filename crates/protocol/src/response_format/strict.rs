//! Whether a schema suits a provider's strict mode (OpenAI's `strict: true` structured outputs,
//! where the model's sampling is held to the schema): every object closed
//! (`additionalProperties: false`) with every property required, the root an object, and only
//! the keywords strict mode accepts. A schema that does not suit it goes with `strict: false`
//! rather than made to suit it — making an `Option` field required, or dropping a `minLength`
//! strict mode refuses, would ask the model for another type than the one asked — and the
//! answer is checked against the whole schema here either way (`schema_check.rs`).
//!
//! A type suits it when it denies unknown fields (`#[serde(deny_unknown_fields)]`, which
//! schemars writes as `additionalProperties: false`) and has no optional fields, no maps, no
//! `oneOf` (data-carrying enums) and no string length bounds.

use serde_json::{Map, Value};

/// Keywords strict mode accepts beside the structure checked below (OpenAI's list: the types,
/// `enum`/`const`/`anyOf`, references, descriptions; `pattern` and `format` for strings; bounds
/// and `multipleOf` for numbers; `minItems`/`maxItems` for arrays).
const ACCEPTED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "description",
    "title",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// The string formats strict mode knows.
const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Whether `schema` (a root schema, its definitions under `$defs`) suits strict mode.
pub(super) fn suits_strict_mode(schema: &Value) -> bool {
    let Some(root) = schema.as_object() else {
        return false;
    };
    root.get("type").and_then(Value::as_str) == Some("object") && suits(schema)
}

fn suits(schema: &Value) -> bool {
    let Some(schema) = schema.as_object() else {
        // `true`/`false` subschemas: strict mode wants every value described.
        return false;
    };
    if !schema.keys().all(|k| ACCEPTED.contains(&k.as_str())) {
        return false;
    }
    if let Some(format) = schema.get("format")
        && !format.as_str().is_some_and(|f| FORMATS.contains(&f))
    {
        return false;
    }
    if (schema.contains_key("properties") || is_object_type(schema)) && !closed_and_complete(schema)
    {
        return false;
    }
    let nested = [
        schema.get("items"),
        schema.get("anyOf"),
        schema.get("$defs"),
        schema.get("properties"),
    ];
    nested.into_iter().flatten().all(|value| match value {
        Value::Array(alternatives) => alternatives.iter().all(suits),
        // `properties` and `$defs` map names to schemas; `items` is a schema.
        Value::Object(map) if map_of_schemas(value, schema) => map.values().all(suits),
        item => suits(item),
    })
}

/// Whether `value` is the `properties` or `$defs` of `schema` (a map of schemas, not a schema).
fn map_of_schemas(value: &Value, schema: &Map<String, Value>) -> bool {
    [schema.get("properties"), schema.get("$defs")]
        .into_iter()
        .flatten()
        .any(|map| std::ptr::eq(map, value))
}

fn is_object_type(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => false,
    }
}

/// `additionalProperties: false`, and every property required.
fn closed_and_complete(schema: &Map<String, Value>) -> bool {
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let complete = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|p| p.keys().all(|k| required.contains(&k.as_str())));
    closed && complete
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn closed_complete_objects_of_accepted_keywords_suit_strict_mode() {
        let point = json!({
            "type": "object",
            "properties": {
                "x": {"type": "integer", "minimum": 0},
                "tag": {"$ref": "#/$defs/Tag"},
                "seen": {"type": "array", "items": {"type": "string", "format": "date"}}
            },
            "required": ["x", "tag", "seen"],
            "additionalProperties": false,
            "$defs": {"Tag": {"type": "string", "enum": ["a", "b"]}}
        });
        assert!(suits_strict_mode(&point));
        let without = |key: &str| {
            let mut open = point.clone();
            open.as_object_mut().unwrap().remove(key);
            open
        };
        // Open, or a property optional: not for strict mode.
        assert!(!suits_strict_mode(&without("additionalProperties")));
        let mut optional = point.clone();
        optional["required"] = json!(["x", "tag"]);
        assert!(!suits_strict_mode(&optional));
        // A keyword strict mode refuses, anywhere.
        let mut bounded = point.clone();
        bounded["$defs"]["Tag"]["minLength"] = json!(1);
        assert!(!suits_strict_mode(&bounded));
        let mut int_format = point.clone();
        int_format["properties"]["x"]["format"] = json!("uint32");
        assert!(!suits_strict_mode(&int_format));
        // A nested object must be closed and complete too.
        let mut nested = point.clone();
        nested["properties"]["inner"] =
            json!({"type": "object", "properties": {"y": {"type": "integer"}}});
        nested["required"] = json!(["x", "tag", "seen", "inner"]);
        assert!(!suits_strict_mode(&nested));
        // The root must be an object.
        assert!(!suits_strict_mode(
            &json!({"type": "array", "items": {"type": "integer"}})
        ));
    }
}
