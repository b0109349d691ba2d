//! The JSON Schema a typed answer must match, as a request carries it to the model
//! ([`ChatRequest::response_format`](crate::ChatRequest::response_format)); the runtime checks
//! the answer against it.

use schemars::JsonSchema;
use serde_json::Value;

use crate::model::ToolDefinition;

mod strict;

/// The JSON Schema an answer must match, as a request carries it to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseFormat {
    /// The schema's name, as OpenAI's `json_schema.name` wants it: letters, digits, `_` and
    /// `-`, at most 64 characters.
    pub name: String,
    /// The JSON Schema (draft 2020-12, as schemars writes it) of the answer.
    pub schema: Value,
    /// Whether a provider that has a strict mode should use it (OpenAI's `strict`): set by
    /// [`ResponseFormat::of`] when the schema suits strict mode — every object closed and
    /// complete, only keywords strict mode accepts (a type that denies unknown fields and has
    /// no `Option` fields, maps or string length bounds) — since strict mode refuses any other
    /// schema. The answer is checked here against the whole schema either way.
    pub strict: bool,
}

impl ResponseFormat {
    /// The format of `T`'s JSON form, its schema derived by schemars.
    pub fn of<T: JsonSchema>() -> Self {
        let mut schema = schemars::schema_for!(T).to_value();
        // The meta-schema URL tells no model anything, and some servers refuse unknown keys.
        if let Some(object) = schema.as_object_mut() {
            object.remove("$schema");
        }
        drop_number_formats(&mut schema);
        ResponseFormat {
            name: wire_name(&T::schema_name()),
            strict: strict::suits_strict_mode(&schema),
            schema,
        }
    }
}

/// schemars writes a number's Rust type as its `format` (`uint8`, `int64`, `double`): no
/// validator asserts it (a format is an annotation), serde checks the range anyway, and strict
/// mode accepts only string formats — so a type with a number field could never be strict.
fn drop_number_formats(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            let numeric = |t: &Value| t == "integer" || t == "number";
            let is_number = match object.get("type") {
                Some(Value::Array(types)) => types.iter().any(numeric),
                Some(t) => numeric(t),
                None => false,
            };
            if is_number && object.get("format").is_some_and(Value::is_string) {
                object.remove("format");
            }
            object.values_mut().for_each(drop_number_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_number_formats),
        _ => {}
    }
}

/// A schema name as OpenAI accepts it (`^[a-zA-Z0-9_-]{1,64}$`): schemars names generic types
/// `Array_of_Point` but may use other characters for others.
fn wire_name(name: &str) -> String {
    let cleaned: String = ToolDefinition::sanitized_name(name)
        .chars()
        .take(ToolDefinition::MAX_NAME)
        .collect();
    if cleaned.is_empty() {
        "answer".to_string()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize, JsonSchema)]
    struct Point {
        x: i32,
        label: Option<String>,
    }

    fn format() -> ResponseFormat {
        ResponseFormat::of::<Point>()
    }

    #[test]
    fn schema_is_the_types_without_the_meta_schema() {
        let format = format();
        assert_eq!(format.name, "Point");
        assert_eq!(format.schema["properties"]["x"]["type"], "integer");
        assert!(format.schema.get("$schema").is_none());
        assert_eq!(
            ResponseFormat::of::<Vec<Point>>().name,
            "Array_of_Point",
            "generic names stay wire names"
        );
        assert_eq!(wire_name("a<b>::c"), "a_b___c");
    }
}
