//! JSON Schemas for tool arguments, shaped for OpenAI function calling.
//!
//! Small local models (constrained by a grammar built from the schema) and strict providers choke
//! on `$ref`s, `$schema` and generator noise, so definitions are inlined and noise is stripped.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The `parameters` schema for `T`: an inlined object schema without `$schema`, `title`,
/// non-standard numeric `format`s, `default: null` or a root description. Doc-comment line breaks
/// inside a paragraph become spaces. Recursive types keep their `$defs`.
pub fn parameters_schema<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    clean_schema(&mut schema);
    if let Value::Object(root) = &mut schema {
        // The function has its own description; the args struct's doc comment only repeats it.
        root.remove("description");
        // OpenAI documents `properties` on every function's parameters, even an empty one.
        if root.get("type").and_then(Value::as_str) == Some("object") {
            root.entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
        }
    }
    schema
}

/// Whether a schema describes a JSON object (what function calling requires of arguments).
pub fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// Keys whose value is a map from names to schemas (the names are data, not keywords).
const SCHEMA_MAPS: &[&str] = &["properties", "$defs", "definitions", "patternProperties"];

/// Numeric formats schemars emits that are not JSON Schema formats.
fn is_noise_format(format: &str) -> bool {
    matches!(format, "float" | "double")
        || format
            .strip_prefix("uint")
            .or_else(|| format.strip_prefix("int"))
            .is_some_and(|bits| bits.is_empty() || bits.chars().all(|c| c.is_ascii_digit()))
}

fn clean_schema(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("$schema");
            map.remove("title");
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(is_noise_format)
            {
                map.remove("format");
            }
            // `#[serde(default)]` on an Option says nothing the `null` type does not.
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = unwrap_lines(text);
            }
            for (key, value) in map.iter_mut() {
                if SCHEMA_MAPS.contains(&key.as_str()) {
                    if let Value::Object(named) = value {
                        named.values_mut().for_each(clean_schema);
                    }
                } else if key != "enum" && key != "const" && key != "default" && key != "examples" {
                    clean_schema(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clean_schema),
        _ => {}
    }
}

/// Doc comments arrive hard-wrapped; a model should see paragraphs, as rustdoc renders them.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}
