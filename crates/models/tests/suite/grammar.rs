//! The JSON Schema → GBNF converter writes llama.cpp's grammar, text for text: the fixtures under
//! `tests/fixtures/grammar/` are llama.cpp's own `json_schema_to_grammar` output (written by the
//! oracle test that compared the two while llama.cpp's converter was still built, see that
//! directory's README), for every schema troupe ships and its tests use, hand-made edge cases and
//! a fixed sample of random schemas. A refused schema (`"refused": true`) must be refused.

use serde_json::Value;
use troupe_models::schema_to_grammar;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/grammar");

/// Every case of `file` whose conversion differs from llama.cpp's, described.
fn differences(file: &str) -> (usize, Vec<String>) {
    let path = format!("{FIXTURES}/{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut count = 0;
    let mut diffs = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{path}: {e}"));
        count += 1;
        let want = case["grammar"].as_str();
        let got = schema_to_grammar(&case["schema"]);
        let same = match (want, &got) {
            (Some(want), Ok(got)) => want == got,
            (None, Err(_)) => case["refused"] == Value::Bool(true),
            _ => false,
        };
        if !same {
            diffs.push(format!(
                "{}: {}\n--- llama.cpp\n{}\n--- port\n{got:?}\n",
                case["name"], case["schema"], case["grammar"]
            ));
        }
    }
    (count, diffs)
}

fn check(file: &str, at_least: usize) {
    let (count, diffs) = differences(file);
    assert!(count >= at_least, "{file}: {count} cases");
    assert!(
        diffs.is_empty(),
        "{file}: {} of {count} differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Troupe's built-in tools, the agent's own tools, the examples' tools and typed answer and
/// server-everything's tools, as parameters and as the local model's tool-call schemas.
#[test]
fn shipped_schemas_convert_as_llama_cpp_does() {
    check("shipped.jsonl", 70);
}

/// The schemas of troupe's tests, and schemars types with range, length and regex bounds.
#[test]
fn test_schemas_convert_as_llama_cpp_does() {
    check("tests.jsonl", 15);
}

/// Each construct (formats, integer ranges, patterns, allOf, refs, ...) and each refusal.
#[test]
fn edge_cases_convert_as_llama_cpp_does() {
    check("edge_cases.jsonl", 140);
}

/// 400 random schemas (nested objects, arrays, tuples, unions, enums, refs, patterns, ranges).
#[test]
fn random_schemas_convert_as_llama_cpp_does() {
    check("random.jsonl", 400);
}

/// An `allOf` that comes back to itself through `$ref`s and properties alone has no finite
/// grammar walk: llama.cpp's converter overflows its stack on it (so no fixture holds one); the
/// port refuses it.
#[test]
fn a_self_referential_all_of_is_refused() {
    let through_a_property = serde_json::json!({
        "$ref": "#/$defs/A",
        "$defs": {"A": {"type": "object", "properties": {"p": {"allOf": [{"$ref": "#/$defs/A"}]}}}}
    });
    let through_refs = serde_json::json!({
        "allOf": [{"$ref": "#/$defs/A"}],
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}
    });
    for schema in [through_a_property, through_refs] {
        assert!(
            matches!(
                schema_to_grammar(&schema),
                Err(troupe_models::SchemaGrammarError::RefCycle(_))
            ),
            "{schema}"
        );
    }
}
