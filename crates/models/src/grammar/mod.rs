//! JSON Schema → GBNF: the grammar the local model samples under for tool calls and typed
//! answers. A port of llama.cpp's `json_schema_to_grammar` (`common/json-schema.cpp` and
//! `common/json-schema-to-grammar.cpp` of the llama.cpp llama-cpp-sys-2 0.1.161 vendors), kept
//! text-for-text equal to it — the golden fixtures under `tests/fixtures/grammar/` are its
//! output — so that troupe does not need llama.cpp's `common` library (~40 % of llama.cpp's
//! build) for this one function. (llama-cpp-2 0.1.160 still compiles it: it takes llama-cpp-sys-2
//! with its default features; see the root Cargo.toml.)
//!
//! - `schema.rs` reads the JSON into typed nodes (and refuses what llama.cpp refuses);
//! - `convert.rs` walks them into named rules, `objects.rs` writes object rules;
//! - `pattern.rs` turns a `pattern` regex into rules, `ranges.rs` repetitions and integer ranges;
//! - `primitives.rs` holds the built-in rules, `json_text.rs` writes JSON as llama.cpp does
//!   (`grisu.rs`: its float digits).

mod convert;
mod grisu;
mod json_text;
mod objects;
mod pattern;
mod primitives;
mod ranges;
mod schema;

use serde_json::Value;

/// Why a JSON schema has no grammar: the cases llama.cpp's converter refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaGrammarError {
    /// The schema falls outside the subset the converter reads (a `$ref` out of the document, a
    /// non-object schema, an unknown `type`, an empty `enum`, a negative `minItems`, ...).
    #[error("JSON schema error at {path}: {message}")]
    Schema {
        /// Where in the schema, as a JSON pointer (`#/properties/x`).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// A `pattern` that is not a valid regular expression.
    #[error("invalid pattern {pattern}: {reason}")]
    InvalidPattern {
        /// The pattern as the schema gives it.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An integer range whose bound overflowed to "no bound" on negation (`maximum: i64::MIN`).
    #[error("an integer range needs a minimum or a maximum")]
    UnboundedIntegerRange,
    /// A `$ref` with no target (the reader resolves every one, so this is a bug guard).
    #[error("unresolved $ref {0}")]
    UnresolvedRef(String),
    /// An `allOf` that leads back to itself through its members' `$ref`s and properties alone
    /// (`A: {"$ref": "#/$defs/A"}` as a member, or a member's property holding the `allOf`):
    /// llama.cpp's converter recurses on it until its stack overflows; this port refuses it.
    #[error("the allOf at {0} refers to itself through $refs and properties alone")]
    RefCycle(String),
    /// A built-in rule the converter does not know (a bug guard, as in llama.cpp).
    #[error("rule {0} not known")]
    UnknownRule(String),
    /// A `pattern` literal that ends inside a multi-byte character (`^é*$`): the grammar would
    /// not be UTF-8, which llama.cpp's converter (through llama-cpp-2) refuses too.
    #[error("the grammar for this schema is not UTF-8 (a pattern splits a multi-byte character)")]
    NotUtf8,
}

/// The GBNF grammar whose `root` rule accepts exactly the JSON `schema` allows (as far as
/// llama.cpp's converter goes: `number` bounds, `uniqueItems`, `not` and the like are ignored),
/// the same text llama.cpp's `json_schema_to_grammar` writes.
pub fn schema_to_grammar(schema: &Value) -> Result<String, SchemaGrammarError> {
    let doc = schema::Document::read(schema)?;
    let mut converter = convert::Converter::new();
    converter.visit(&doc, &doc.root, "")?;
    String::from_utf8(converter.format_grammar()).map_err(|_| SchemaGrammarError::NotUtf8)
}
