//! Locate where JSON arguments disagree with a tool's schema.
//!
//! serde names a missing or unknown field but not the field whose value has the wrong type, and
//! a model can only fix what it is told. This is not a full JSON Schema validator: it covers the
//! keywords schemars emits for plain Rust types (type, properties, required,
//! additionalProperties, items, enum, const, anyOf/oneOf/allOf, minimum/maximum) and is only
//! consulted after serde has already rejected the arguments.

use serde_json::{Map, Value};

/// Where the arguments go wrong and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// Path of the offending field (`path`, `edits[0].old`); empty for the whole object.
    pub path: String,
    /// What is wrong, for the model.
    pub problem: String,
}

/// The first place where `value` does not match `schema`, if the checked keywords find one.
pub(crate) fn find_mismatch(value: &Value, schema: &Value) -> Option<Mismatch> {
    check(value, schema, "")
}

fn mismatch(path: &str, problem: impl Into<String>) -> Option<Mismatch> {
    Some(Mismatch {
        path: path.to_string(),
        problem: problem.into(),
    })
}

fn check(value: &Value, schema: &Value, path: &str) -> Option<Mismatch> {
    let schema = match schema {
        Value::Bool(true) => return None,
        Value::Bool(false) => return mismatch(path, "is not allowed here"),
        Value::Object(schema) => schema,
        _ => return None,
    };
    if let Some(found) = check_alternatives(value, schema, path) {
        return Some(found);
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array)
        && let Some(found) = all.iter().find_map(|s| check(value, s, path))
    {
        return Some(found);
    }
    if let Some(types) = schema.get("type")
        && !type_matches(value, types)
    {
        return mismatch(
            path,
            format!(
                "expected {}, got {}",
                describe_types(types),
                describe_value(value)
            ),
        );
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return mismatch(
            path,
            format!(
                "expected one of {}, got {}",
                list.join(", "),
                describe_value(value)
            ),
        );
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return mismatch(
            path,
            format!("expected {constant}, got {}", describe_value(value)),
        );
    }
    check_bounds(value, schema, path)
        .or_else(|| check_object(value, schema, path))
        .or_else(|| check_array(value, schema, path))
}

fn check_alternatives(value: &Value, schema: &Map<String, Value>, path: &str) -> Option<Mismatch> {
    let branches = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))?
        .as_array()?;
    let failures: Vec<Mismatch> = branches
        .iter()
        .map(|b| check(value, b, path))
        .collect::<Option<Vec<_>>>()?;
    // Every branch failed: the deepest failure is usually the branch the model meant.
    failures.into_iter().max_by_key(|m| m.path.len())
}

fn check_bounds(value: &Value, schema: &Map<String, Value>, path: &str) -> Option<Mismatch> {
    let n = value.as_f64()?;
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && n < min
    {
        return mismatch(path, format!("must be at least {min}, got {value}"));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
        && n > max
    {
        return mismatch(path, format!("must be at most {max}, got {value}"));
    }
    None
}

fn check_object(value: &Value, schema: &Map<String, Value>, path: &str) -> Option<Mismatch> {
    let object = value.as_object()?;
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array)
        && let Some(missing) = required
            .iter()
            .filter_map(Value::as_str)
            .find(|k| !object.contains_key(*k))
    {
        return mismatch(&join(path, missing), "missing");
    }
    for (key, field) in object {
        let field_path = join(path, key);
        match properties.and_then(|p| p.get(key)) {
            Some(field_schema) => {
                if let Some(found) = check(field, field_schema, &field_path) {
                    return Some(found);
                }
            }
            None => {
                if let Some(extra) = schema.get("additionalProperties") {
                    if extra == &Value::Bool(false) {
                        return mismatch(&field_path, "unknown field");
                    }
                    if let Some(found) = check(field, extra, &field_path) {
                        return Some(found);
                    }
                }
            }
        }
    }
    None
}

fn check_array(value: &Value, schema: &Map<String, Value>, path: &str) -> Option<Mismatch> {
    let items = value.as_array()?;
    let item_schema = schema.get("items")?;
    items
        .iter()
        .enumerate()
        .find_map(|(i, item)| check(item, item_schema, &format!("{path}[{i}]")))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn type_matches(value: &Value, types: &Value) -> bool {
    match types {
        Value::String(t) => single_type_matches(value, t),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .any(|t| single_type_matches(value, t)),
        _ => true,
    }
}

fn single_type_matches(value: &Value, t: &str) -> bool {
    match t {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => true,
    }
}

/// `string`, `integer or null`, …
pub(crate) fn describe_types(types: &Value) -> String {
    match types {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".to_string(),
    }
}

/// `string "abc"`, `integer 5`, `an object`, … (long values shortened).
fn describe_value(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) if n.is_f64() => format!("number {n}"),
        Value::Number(n) => format!("integer {n}"),
        Value::String(s) if s.chars().count() > 40 => {
            let head: String = s.chars().take(40).collect();
            format!("string {:?}…", head)
        }
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}
