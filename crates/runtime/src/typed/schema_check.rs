//! A typed answer checked against its whole JSON Schema, not only its type: serde knows that a
//! field is a `u8`, but not the `#[schemars(range(min = 1))]`, `length` or `regex` bound the
//! type's schema states, and a provider without a strict mode (most local OpenAI-compatible
//! servers) never enforced it. The `jsonschema` crate does, keyword by keyword; its errors say
//! where (the instance path) and which rule (the keyword).

use jsonschema::paths::LocationSegment;
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

/// The most violations one answer's message lists (the rest are counted).
const MAX_LISTED: usize = 3;
/// A violation quoting the answer's value longer than this says "the value" instead (a
/// `maxLength` broken by a page of text would quote the page).
const MAX_QUOTED_CHARS: usize = 160;

/// Where an answer breaks its schema: the first violation's field, and what is wrong there —
/// the rule by its keyword — with any others after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Violation {
    /// The field, as [`TypedAnswerError::Mismatch`](super::TypedAnswerError::Mismatch) names
    /// it: `.`, `age`, `items[2].name`.
    pub(super) field: String,
    /// ``breaks `minimum`: 0 is less than the minimum of 1``, then `; at `x`: …` for others.
    pub(super) message: String,
}

/// A compiled schema, for checking answers.
pub(super) struct SchemaCheck(Validator);

impl SchemaCheck {
    /// Compile `schema`; remote references are never fetched (the crate's resolvers are off).
    ///
    /// # Errors
    /// The validator's word on a schema it cannot compile.
    pub(super) fn new(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema)
            .map(SchemaCheck)
            .map_err(|e| e.to_string())
    }

    /// The violations of `answer`, if any.
    pub(super) fn violation(&self, answer: &Value) -> Option<Violation> {
        let errors: Vec<ValidationError<'_>> = self.0.iter_errors(answer).collect();
        let first = errors.first()?;
        let mut message = rule(first);
        for other in errors.iter().skip(1).take(MAX_LISTED - 1) {
            message.push_str(&format!("; at `{}`: {}", field(other), rule(other)));
        }
        if errors.len() > MAX_LISTED {
            message.push_str(&format!(
                "; and {} more violations",
                errors.len() - MAX_LISTED
            ));
        }
        Some(Violation {
            field: field(first),
            message,
        })
    }
}

/// The rule an error broke and how: ``breaks `maxLength`: "Oslo, Norway" is longer than 8
/// characters``.
fn rule(error: &ValidationError<'_>) -> String {
    let said = error.to_string();
    let said = if said.chars().count() > MAX_QUOTED_CHARS {
        error.masked_with("the value").to_string()
    } else {
        said
    };
    format!("breaks `{}`: {said}", error.kind().keyword())
}

/// The instance path as the typed-answer errors write paths: `.` for the root, `a.b[2].c`.
fn field(error: &ValidationError<'_>) -> String {
    let mut path = String::new();
    for segment in error.instance_path().iter() {
        match segment {
            LocationSegment::Index(i) => path.push_str(&format!("[{i}]")),
            LocationSegment::Property(name) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&name);
            }
        }
    }
    if path.is_empty() {
        ".".to_string()
    } else {
        path
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn violations_name_the_field_and_the_rule() {
        let schema = json!({
            "type": "object",
            "properties": {
                "age": {"type": "integer", "minimum": 18},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}}
            }
        });
        let check = SchemaCheck::new(&schema).unwrap();
        assert_eq!(check.violation(&json!({"age": 20, "tags": ["a"]})), None);
        let one = check.violation(&json!({"age": 5})).unwrap();
        assert_eq!(one.field, "age");
        assert_eq!(
            one.message,
            "breaks `minimum`: 5 is less than the minimum of 18"
        );
        let two = check
            .violation(&json!({"age": 5, "tags": ["ok", "toolong"]}))
            .unwrap();
        assert_eq!(two.field, "age");
        assert!(
            two.message.ends_with(
                "; at `tags[1]`: breaks `maxLength`: \"toolong\" is longer than 3 characters"
            ),
            "{}",
            two.message
        );
        // A long value is not quoted back.
        let long = "x".repeat(1_000);
        let masked = check.violation(&json!({"tags": [long]})).unwrap();
        assert_eq!(masked.field, "tags[0]");
        assert!(!masked.message.contains("xxxx"), "{}", masked.message);
        assert!(
            masked.message.starts_with("breaks `maxLength`: the value"),
            "{}",
            masked.message
        );
        assert_eq!(check.violation(&json!("no object")).unwrap().field, ".");
    }
}
