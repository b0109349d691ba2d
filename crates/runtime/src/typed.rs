//! Typed answers: an agent asked for a value of a Rust type instead of text
//! ([`Team::ask_typed`](crate::Team::ask_typed)).
//!
//! The type's JSON Schema travels with the request as a [`ResponseFormat`] (on
//! [`AgentRequest`](crate::AgentRequest), then on every [`ChatRequest`](troupe_protocol::ChatRequest) the
//! agent makes for it); each provider constrains its answer its own way (OpenAI-compatible
//! `response_format`, strict where the schema suits strict mode; the embedded model's grammar;
//! Anthropic's forced answer tool). Whatever the provider did, the answer is checked here: by
//! deserializing it into the type, then against the whole schema — the bounds a type's
//! `#[schemars(range, length, regex)]` attributes state, which serde does not know and a
//! provider without a strict mode never enforced — and a mismatch names the field and the rule
//! ([`TypedAnswerError`]).

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::supervisor::directory::AskError;
use troupe_protocol::ResponseFormat;

mod schema_check;

/// The instruction that asks for an answer in this format once more: where the last one
/// went wrong, and that only the JSON value is wanted.
pub(crate) fn correction(format: &ResponseFormat, field: &str, message: &str) -> String {
    format!(
        "Your answer does not match the required JSON schema `{}`: at `{field}`: {message}. \
         Reply again with only the corrected JSON value, nothing else.",
        format.name
    )
}

/// Why a typed ask got no value of the asked type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TypedAnswerError {
    /// The ask itself failed (no such agent, a model error, a timeout…).
    #[error(transparent)]
    Ask(#[from] AskError),
    /// The agent answered, but its answer is not a value of the type, or breaks a rule of its
    /// schema — after it was asked once more with the error.
    #[error("the answer does not match `{schema}` at `{field}`: {message}")]
    Mismatch {
        /// The schema's name ([`ResponseFormat::name`]).
        schema: String,
        /// Where in the answer: a path like `.`, `kind` or `items[2].name` (a missing field is
        /// named by its own path).
        field: String,
        /// What is wrong there: serde's word on a value that is not of the type, or the rule
        /// broken by its keyword (``breaks `minimum`: 0 is less than the minimum of 1``), then
        /// any further rules broken elsewhere.
        message: String,
        /// The last answer, verbatim.
        answer: String,
    },
    /// The type's schema cannot be compiled for checking (a schema schemars derived but the
    /// validator does not read): no answer can be checked against it.
    #[error("the schema `{schema}` cannot be checked: {message}")]
    Schema {
        /// The schema's name ([`ResponseFormat::name`]).
        schema: String,
        /// The validator's word on it.
        message: String,
    },
}

/// The answer as a `T` that keeps every rule of its schema, or where and why it is not one.
///
/// A single JSON value is expected; a Markdown code fence around it (which models write even
/// when told not to) is taken off first. serde judges the type first (its words on a wrong
/// type or a missing field are the clearest), then the schema its bounds.
pub(crate) fn parse_answer<T: DeserializeOwned>(
    answer: &str,
    format: &ResponseFormat,
) -> Result<T, TypedAnswerError> {
    let mismatch = |field: String, message: String| TypedAnswerError::Mismatch {
        schema: format.name.clone(),
        field,
        message,
        answer: answer.to_string(),
    };
    let text = unfenced(answer);
    let mut json = serde_json::Deserializer::from_str(text);
    let parsed = serde_path_to_error::deserialize::<_, T>(&mut json)
        .map_err(|e| (e.path().to_string(), e.into_inner().to_string()))
        // Trailing characters after the value: an error at the root.
        .and_then(|value| {
            json.end()
                .map(|()| value)
                .map_err(|e| (".".to_string(), e.to_string()))
        });
    let value =
        parsed.map_err(|(path, message)| mismatch(missing_field_path(&path, &message), message))?;
    // It parsed as a `T`, so it is JSON.
    let json: Value =
        serde_json::from_str(text).map_err(|e| mismatch(".".to_string(), e.to_string()))?;
    let check = schema_check::SchemaCheck::new(&format.schema).map_err(|message| {
        TypedAnswerError::Schema {
            schema: format.name.clone(),
            message,
        }
    })?;
    match check.violation(&json) {
        None => Ok(value),
        Some(broken) => Err(mismatch(broken.field, broken.message)),
    }
}

/// serde reports a missing field at its parent's path; the field itself is what to name.
fn missing_field_path(path: &str, message: &str) -> String {
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    match missing {
        Some(name) if path == "." => name.to_string(),
        Some(name) => format!("{path}.{name}"),
        None => path.to_string(),
    }
}

/// The text inside a single ```-fence, or the trimmed text.
fn unfenced(answer: &str) -> &str {
    let text = answer.trim();
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return text;
    };
    // The fence's info string (`json`) runs to the end of its line.
    body.split_once('\n')
        .map_or(body, |(_, inner)| inner)
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;

    #[derive(Debug, PartialEq, serde::Deserialize, JsonSchema)]
    struct Point {
        x: i32,
        label: Option<String>,
    }

    fn format() -> ResponseFormat {
        ResponseFormat::of::<Point>()
    }

    #[test]
    fn answers_parse_with_or_without_a_fence() {
        let point = Point { x: 3, label: None };
        let parsed = parse_answer::<Point>(r#" {"x": 3} "#, &format());
        assert_eq!(parsed, Ok(Point { x: 3, label: None }));
        let fenced = parse_answer::<Point>("```json\n{\"x\": 3}\n```", &format());
        assert_eq!(fenced, Ok(point));
    }

    #[test]
    fn mismatches_name_the_field() {
        let field = |answer: &str| match parse_answer::<Point>(answer, &format()) {
            Err(TypedAnswerError::Mismatch {
                field, answer: a, ..
            }) => {
                assert_eq!(a, answer);
                field
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(field(r#"{"x": "three"}"#), "x");
        assert_eq!(field(r#"{"label": "a"}"#), "x");
        assert_eq!(field(r#"{"x": 1, "label": 7}"#), "label");
        assert_eq!(field("not json"), ".");
        assert_eq!(field(r#"{"x": 1} and more"#), ".");
    }

    #[test]
    fn a_schema_the_validator_cannot_read_is_a_typed_error() {
        let broken = ResponseFormat {
            schema: serde_json::json!({"type": 5}),
            ..format()
        };
        let parsed = parse_answer::<Point>(r#"{"x": 3}"#, &broken);
        assert!(
            matches!(&parsed, Err(TypedAnswerError::Schema { schema, .. }) if schema == "Point"),
            "{parsed:?}"
        );
    }
}
