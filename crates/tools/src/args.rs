//! Turning the model's argument string into a tool's typed arguments, or into a message that
//! tells the model exactly what to fix.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::result::ToolFailure;
use crate::validate::{describe_types, find_mismatch};

/// Why the arguments could not be used: the failure class and a message for the model.
pub(crate) type ArgsError = (ToolFailure, String);

/// Parse `raw` (the model's argument string) into `A`, using `schema` to explain failures.
pub(crate) fn parse_args<A: DeserializeOwned>(
    tool: &str,
    raw: &str,
    schema: &Value,
) -> Result<A, ArgsError> {
    let value = parse_json(tool, raw, schema)?;
    serde_json::from_value::<A>(value.clone()).map_err(|e| {
        let (field, detail) = match find_mismatch(&value, schema) {
            Some(m) if m.problem == "missing" => (
                Some(m.path.clone()),
                format!("missing field \"{}\"", m.path),
            ),
            Some(m) if m.problem == "unknown field" => (
                Some(m.path.clone()),
                format!("unknown field \"{}\"", m.path),
            ),
            Some(m) if m.path.is_empty() => (None, m.problem),
            Some(m) => (
                Some(m.path.clone()),
                format!("field \"{}\": {}", m.path, m.problem),
            ),
            None => {
                let message = e.to_string().replace('`', "\"");
                (field_in_serde_message(&message), message)
            }
        };
        let message = format!(
            "invalid arguments for {tool}: {detail}; {}",
            describe_parameters(schema)
        );
        (ToolFailure::InvalidArguments { field }, message)
    })
}

/// Parse `raw` into a JSON object and check it against `schema` itself — for tools whose
/// schema is data ([`crate::JsonTool`]), where no serde type stands in for the check.
pub(crate) fn parse_json_args(
    tool: &str,
    raw: &str,
    schema: &Value,
) -> Result<Map<String, Value>, ArgsError> {
    let value = parse_json(tool, raw, schema)?;
    if let Some(m) = find_mismatch(&value, schema) {
        let (field, detail) = match m.problem.as_str() {
            "missing" => (
                Some(m.path.clone()),
                format!("missing field \"{}\"", m.path),
            ),
            "unknown field" => (
                Some(m.path.clone()),
                format!("unknown field \"{}\"", m.path),
            ),
            _ if m.path.is_empty() => (None, m.problem),
            _ => (
                Some(m.path.clone()),
                format!("field \"{}\": {}", m.path, m.problem),
            ),
        };
        let message = format!(
            "invalid arguments for {tool}: {detail}; {}",
            describe_parameters(schema)
        );
        return Err((ToolFailure::InvalidArguments { field }, message));
    }
    match value {
        Value::Object(args) => Ok(args),
        _ => Ok(Map::new()),
    }
}

/// Why a model's argument string is not a JSON object of named arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnreadableArguments {
    /// Not JSON at all (the parser's words).
    #[error("malformed JSON: {0}")]
    Malformed(String),
    /// JSON, but not an object: `"a string"`, `"an array"`, `"a boolean"` or `"a number"`.
    #[error("expected a JSON object of named parameters, got {0}")]
    NotAnObject(&'static str),
}

/// The model's argument string `raw` read as the JSON object a tool receives, with the lenient
/// readings small models need: empty or `null` is `{}`, and an object JSON-encoded twice (a
/// string holding the object) is that object.
///
/// This is the one reading of a call's arguments: [`ToolRegistry::dispatch`] runs tools on it,
/// and an approval policy judges it, so what a control checks is exactly what then runs.
///
/// # Errors
/// [`UnreadableArguments`] when `raw` is neither JSON nor an object under those readings.
///
/// [`ToolRegistry::dispatch`]: crate::ToolRegistry::dispatch
pub fn read_arguments(raw: &str) -> Result<Map<String, Value>, UnreadableArguments> {
    // Models often send "" (or nothing) for a tool without parameters.
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    let value: Value =
        serde_json::from_str(raw).map_err(|e| UnreadableArguments::Malformed(e.to_string()))?;
    match value {
        Value::Object(object) => Ok(object),
        Value::Null => Ok(Map::new()),
        // Some models JSON-encode the arguments object twice.
        Value::String(inner) => match serde_json::from_str::<Value>(&inner) {
            Ok(Value::Object(object)) => Ok(object),
            _ => Err(UnreadableArguments::NotAnObject("a string")),
        },
        Value::Array(_) => Err(UnreadableArguments::NotAnObject("an array")),
        Value::Bool(_) => Err(UnreadableArguments::NotAnObject("a boolean")),
        Value::Number(_) => Err(UnreadableArguments::NotAnObject("a number")),
    }
}

/// The arguments as a JSON object ([`read_arguments`]), or a message for the model.
fn parse_json(tool: &str, raw: &str, schema: &Value) -> Result<Value, ArgsError> {
    match read_arguments(raw) {
        Ok(object) => Ok(Value::Object(object)),
        Err(UnreadableArguments::Malformed(e)) => {
            let message = format!(
                "malformed JSON arguments for {tool}: {e}; send the arguments as one JSON \
                 object, {}",
                describe_parameters(schema)
            );
            Err((ToolFailure::MalformedArguments, message))
        }
        Err(UnreadableArguments::NotAnObject(got)) => Err(not_an_object(tool, got, schema)),
    }
}

fn not_an_object(tool: &str, got: &str, schema: &Value) -> ArgsError {
    let message = format!(
        "invalid arguments for {tool}: expected a JSON object of named parameters, got {got}; {}",
        describe_parameters(schema)
    );
    (ToolFailure::InvalidArguments { field: None }, message)
}

/// The field serde names in messages like ``missing field `path` ``, if any.
fn field_in_serde_message(message: &str) -> Option<String> {
    let rest = ["missing field \"", "unknown field \"", "duplicate field \""]
        .iter()
        .find_map(|prefix| message.find(prefix).map(|at| &message[at + prefix.len()..]))?;
    rest.split('"').next().map(str::to_string)
}

/// `expected parameters: path (string, required), start_line (integer or null)`.
pub(crate) fn describe_parameters(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "expected an object".to_string();
    };
    if properties.is_empty() {
        return "this tool takes no parameters: send {}".to_string();
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, field)| {
            let kind = field
                .get("type")
                .map_or_else(|| "any".to_string(), describe_types);
            if required.contains(&name.as_str()) {
                format!("{name} ({kind}, required)")
            } else {
                format!("{name} ({kind})")
            }
        })
        .collect();
    format!("expected parameters: {}", fields.join(", "))
}
