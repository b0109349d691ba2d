//! The Rust JSON Schema → GBNF port (`crate::grammar`) against llama.cpp's own converter, on
//! every schema troupe ships and its tests use, schemars types with bounds, hand-made edge cases
//! and random schemas: the same grammar text, or both refuse. With `TROUPE_BLESS_GRAMMAR=1` it
//! writes llama.cpp's answers to `tests/fixtures/grammar/*.jsonl`, which the golden test
//! (`tests/suite/grammar.rs`) keeps checking once llama.cpp's converter is no longer built.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use schemars::JsonSchema;
use serde_json::{Value, json};
use troupe_protocol::{ResponseFormat, ToolDefinition};

use super::prompt::{loose_tool_call_schema, tool_call_schema};
use crate::grammar::{SchemaGrammarError, schema_to_grammar};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/grammar");

/// llama.cpp's answer: the grammar, or `None` where it refuses. A schema the port refuses as
/// `RefCycle` is not given to llama.cpp, whose converter recurses on it until the test process
/// dies of a stack overflow: it is taken as refused.
fn oracle(schema: &Value) -> Option<String> {
    if let Err(SchemaGrammarError::RefCycle(_)) = schema_to_grammar(schema) {
        return None;
    }
    llama_cpp_2::json_schema_to_grammar(&schema.to_string()).ok()
}

/// The port's answer, in the same shape.
fn port(schema: &Value) -> Option<String> {
    schema_to_grammar(schema).ok()
}

/// Compare the port with llama.cpp on `cases`; the names of those that differ, with both texts.
fn differences(cases: &[(String, Value)]) -> Vec<String> {
    cases
        .iter()
        .filter_map(|(name, schema)| {
            let (want, got) = (oracle(schema), port(schema));
            (want != got)
                .then(|| format!("{name}: {schema}\n--- llama.cpp\n{want:?}\n--- port\n{got:?}\n"))
        })
        .collect()
}

/// Write llama.cpp's answers for `cases` as `file`, one JSON line per case.
fn bless(file: &str, cases: &[(String, Value)]) {
    if std::env::var("TROUPE_BLESS_GRAMMAR").is_err() {
        return;
    }
    let lines: Vec<String> = cases
        .iter()
        .map(|(name, schema)| {
            let line = match oracle(schema) {
                Some(grammar) => json!({"name": name, "schema": schema, "grammar": grammar}),
                None => json!({"name": name, "schema": schema, "refused": true}),
            };
            line.to_string()
        })
        .collect();
    let path = format!("{FIXTURES}/{file}");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap_or_else(|e| panic!("{path}: {e}"));
}

fn check(file: &str, cases: &[(String, Value)]) {
    let diffs = differences(cases);
    assert!(
        diffs.is_empty(),
        "{} of {} schemas differ from llama.cpp:\n{}",
        diffs.len(),
        cases.len(),
        diffs.join("\n")
    );
    bless(file, cases);
}

fn definition(value: &Value) -> ToolDefinition {
    ToolDefinition {
        name: value["name"].as_str().unwrap_or_default().to_string(),
        description: value["description"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        parameters: value["parameters"].clone(),
    }
}

/// The schemas `shipped_schemas.json` holds (troupe's built-in tools, the agent's own tools, the
/// examples' tools and typed answer, server-everything's tools), as the local model converts
/// them: each tool's parameters, each set's tool-call schema (and its loose fallback), every tool
/// in one call schema, one call schema per tool.
fn shipped_cases() -> Vec<(String, Value)> {
    let path = format!("{FIXTURES}/shipped_schemas.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let shipped: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let mut cases = Vec::new();
    let mut all = Vec::new();
    for set in shipped["tool_sets"].as_array().into_iter().flatten() {
        let source = set["source"].as_str().unwrap_or_default();
        let tools: Vec<ToolDefinition> = set["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(definition)
            .collect();
        let refs: Vec<&ToolDefinition> = tools.iter().collect();
        for tool in &tools {
            cases.push((
                format!("{source}: {} parameters", tool.name),
                tool.parameters.clone(),
            ));
            cases.push((
                format!("{source}: {} call", tool.name),
                tool_call_schema(&[tool]),
            ));
        }
        cases.push((format!("{source}: call"), tool_call_schema(&refs)));
        cases.push((
            format!("{source}: loose call"),
            loose_tool_call_schema(&refs),
        ));
        all.extend(tools);
    }
    let refs: Vec<&ToolDefinition> = all.iter().collect();
    cases.push(("every shipped tool: call".into(), tool_call_schema(&refs)));
    for answer in shipped["answers"].as_array().into_iter().flatten() {
        let source = answer["source"].as_str().unwrap_or_default();
        cases.push((format!("{source}: answer"), answer["schema"].clone()));
    }
    cases
}

// The typed answers and tool arguments of troupe's tests, and schemars bounds.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Pet {
    #[schemars(length(max = 20))]
    name: String,
    #[schemars(range(max = 30))]
    age: u8,
    kind: Kind,
    #[schemars(length(max = 20))]
    nickname: Option<String>,
}

#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Kind {
    Cat,
    Dog,
    Fish,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
enum Size {
    Small,
    Large,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Answer {
    name: String,
    count: u32,
    size: Size,
    note: Option<String>,
    tags: Vec<String>,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct AddArgs {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Bounded {
    #[schemars(range(min = 1, max = 10))]
    small: u32,
    #[schemars(range(min = -50, max = 50))]
    signed: i32,
    #[schemars(range(min = 1000))]
    at_least: i64,
    #[schemars(range(max = -7))]
    at_most: i64,
    #[schemars(range(min = 0.5, max = 9.5))]
    fraction: i32,
    #[schemars(range(min = 0.0, max = 1.0))]
    ratio: f64,
    tiny: u8,
    small_signed: i8,
    big: u64,
    #[schemars(length(min = 2, max = 8))]
    code: String,
    #[schemars(length(min = 1))]
    not_empty: String,
    #[schemars(length(min = 1, max = 3))]
    few: Vec<u16>,
    #[schemars(regex(pattern = r"^[a-z][a-z0-9_]{2,15}$"))]
    handle: String,
    #[schemars(regex(pattern = r"^\d{3}-\d{4}$"))]
    phone: String,
    #[schemars(regex(pattern = "[a-z]+"))]
    unanchored: String,
    #[schemars(email)]
    email: String,
    pair: (u8, String),
    scores: HashMap<String, u32>,
    choice: Choice,
    flag: Option<bool>,
    nothing: (),
}

#[derive(JsonSchema)]
#[allow(dead_code)]
enum Choice {
    Plain,
    Point { x: i32, y: i32 },
    Named(String),
    Pair(u8, u8),
}

#[derive(JsonSchema)]
#[serde(tag = "type", deny_unknown_fields)]
#[allow(dead_code)]
enum Tagged {
    Move {
        #[schemars(range(min = 0, max = 100))]
        x: u8,
    },
    Say {
        #[schemars(length(max = 5))]
        text: String,
    },
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Tree {
    label: String,
    children: Vec<Tree>,
    meta: BTreeMap<String, serde_json::Value>,
}

fn schema_of<T: JsonSchema>() -> Value {
    ResponseFormat::of::<T>().schema
}

/// The schemas in troupe-models', troupe-agents' and troupe-mcp's tests, and schemars types.
fn test_cases() -> Vec<(String, Value)> {
    let point = json!({"type": "object", "properties": {"to": {"$ref": "#/$defs/Point"}},
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}}});
    let weather = json!({"type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"]});
    let email = json!({"type": "object",
        "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                       "urgent": {"type": "boolean"}},
        "required": ["to", "subject"]});
    let alarm = json!({"type": "object",
        "properties": {"hour": {"type": "integer"}, "loud": {"type": "boolean"}},
        "required": ["hour", "loud"]});
    let tool = |name: &str, parameters: &Value| ToolDefinition {
        name: name.into(),
        description: String::new(),
        parameters: parameters.clone(),
    };
    let (mv, stop) = (tool("move", &point), tool("stop", &json!({})));
    let (w, e, a) = (
        tool("get_weather", &weather),
        tool("send_email", &email),
        tool("set_alarm", &alarm),
    );
    let any = tool("lookup", &json!({"type": "object"}));
    vec![
        (
            "models prompt: hoisted $defs".into(),
            tool_call_schema(&[&mv, &stop]),
        ),
        (
            "models prompt: any object".into(),
            tool_call_schema(&[&any]),
        ),
        (
            "models: dangling $ref".into(),
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}),
        ),
        ("models: answer".into(), schema_of::<Answer>()),
        (
            "agents model_local: tools".into(),
            tool_call_schema(&[&w, &e]),
        ),
        (
            "agents model_local: loose".into(),
            loose_tool_call_schema(&[&w, &e]),
        ),
        (
            "agents model_local_team: weather".into(),
            tool_call_schema(&[&w]),
        ),
        (
            "agents model_local_team: alarm".into(),
            tool_call_schema(&[&a]),
        ),
        ("agents model_local_typed: pet".into(), schema_of::<Pet>()),
        (
            "mcp http: add".into(),
            troupe_tools_like_parameters(schema_of::<AddArgs>()),
        ),
        ("schemars: bounded".into(), schema_of::<Bounded>()),
        ("schemars: choice".into(), schema_of::<Choice>()),
        ("schemars: tagged".into(), schema_of::<Tagged>()),
        ("schemars: tree".into(), schema_of::<Tree>()),
        (
            "schemars: bounded as a tool".into(),
            tool_call_schema(&[
                &tool("bounded", &schema_of::<Bounded>()),
                &tool("tree", &schema_of::<Tree>()),
            ]),
        ),
    ]
}

/// A schemars schema as a tool's parameters (its `$schema` and `title` dropped, as troupe-tools'
/// `parameters_schema` does; kept simple here: the converter ignores both).
fn troupe_tools_like_parameters(mut schema: Value) -> Value {
    if let Some(o) = schema.as_object_mut() {
        o.remove("$schema");
        o.remove("title");
    }
    schema
}

/// Hand-made schemas for each construct the converter knows, and each case it refuses.
fn edge_cases() -> Vec<(String, Value)> {
    let mut cases: Vec<(String, Value)> = Vec::new();
    let mut add = |name: &str, schema: Value| cases.push((name.to_string(), schema));
    add("empty", json!({}));
    add("string", json!({"type": "string"}));
    add("any object", json!({"type": "object"}));
    add(
        "closed empty object",
        json!({"type": "object", "additionalProperties": false}),
    );
    add("any array", json!({"type": "array"}));
    add(
        "tuple",
        json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}),
    );
    add(
        "items as tuple",
        json!({"items": [{"type": "null"}, {"const": 1.5}]}),
    );
    add(
        "min max items",
        json!({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 5}),
    );
    add(
        "max items 1",
        json!({"type": "array", "items": {"type": "number"}, "maxItems": 1}),
    );
    add(
        "min items 1 max 1",
        json!({"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 1}),
    );
    add(
        "max items 0",
        json!({"type": "array", "items": {}, "maxItems": 0}),
    );
    add("min items 3", json!({"type": "array", "minItems": 3}));
    add(
        "string lengths",
        json!({"type": "string", "minLength": 3, "maxLength": 3}),
    );
    add("string max 0", json!({"type": "string", "maxLength": 0}));
    add("string min 1", json!({"minLength": 1}));
    for format in [
        "date",
        "time",
        "date-time",
        "uuid",
        "uuid4",
        "uuid7",
        "email",
        "uri",
    ] {
        add(
            &format!("format {format}"),
            json!({"type": "string", "format": format}),
        );
    }
    add(
        "format on a property",
        json!({"properties": {"when": {"format": "date-time"}, "id": {"type": "string", "format": "uuid"}}}),
    );
    for (min, max) in [
        (Some(0), Some(9)),
        (Some(1), Some(300)),
        (Some(-5), Some(5)),
        (Some(-300), Some(-20)),
        (Some(15), Some(1234)),
        (Some(0), None),
        (Some(1), None),
        (Some(7), None),
        (Some(10), None),
        (Some(123), None),
        (Some(-1), None),
        (Some(-1234), None),
        (None, Some(0)),
        (None, Some(9)),
        (None, Some(250)),
        (None, Some(-1)),
        (None, Some(-987)),
        (Some(5), Some(3)),
        (Some(50), Some(3)),
        (Some(9_000_000_000), Some(9_000_000_123)),
        (Some(i64::MIN + 1), Some(i64::MAX - 1)),
        (Some(100), Some(100)),
        (Some(99), Some(101)),
        (Some(0), Some(0)),
    ] {
        let mut schema = json!({"type": "integer"});
        if let Some(min) = min {
            schema["minimum"] = json!(min);
        }
        if let Some(max) = max {
            schema["maximum"] = json!(max);
        }
        add(&format!("integer {min:?}..{max:?}"), schema);
    }
    add(
        "integer exclusive",
        json!({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}),
    );
    add(
        "integer fractional",
        json!({"type": "integer", "minimum": 0.5, "maximum": 99.5}),
    );
    add(
        "integer fractional exclusive",
        json!({"type": "integer", "exclusiveMinimum": -2.5, "exclusiveMaximum": 7.5}),
    );
    add(
        "integer bound not a number",
        json!({"type": "integer", "minimum": "3"}),
    );
    add(
        "number bounds ignored",
        json!({"type": "number", "minimum": 0, "maximum": 1}),
    );
    add(
        "const string",
        json!({"const": "say \"hi\"\n\\ \u{1} é \u{7f}"}),
    );
    add("const number", json!({"const": 1e20}));
    add("const small", json!({"const": 1e-7}));
    add(
        "const floats",
        json!({"enum": [0.1, 2.0, -0.0, 123456.789, 1e15, 1e16, 0.0001, 0.00001, 5e-324, 1.7976931348623157e308]}),
    );
    add(
        "const object",
        json!({"const": {"b": [1, null, true], "a": {"x": "y"}}}),
    );
    add(
        "enum mixed",
        json!({"enum": ["a", 1, null, false, [1], {"k": "v"}]}),
    );
    add("enum empty", json!({"enum": []}));
    add("enum not array", json!({"enum": "a"}));
    add(
        "type array",
        json!({"type": ["string", "null"], "maxLength": 4}),
    );
    add("type array empty", json!({"type": []}));
    add("type unknown", json!({"type": "float"}));
    add("type number", json!({"type": 3}));
    add(
        "oneOf",
        json!({"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 1}]}),
    );
    add(
        "anyOf nested",
        json!({"properties": {"v": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "string"}}]}}}),
    );
    add("oneOf empty", json!({"oneOf": []}));
    add(
        "allOf objects",
        json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}},
        {"$ref": "#/$defs/B"},
        {"anyOf": [{"type": "object", "properties": {"c": {"type": "integer"}}}]}],
        "$defs": {"B": {"type": "object", "properties": {"b": {"type": "boolean"}}}}}),
    );
    add(
        "allOf enums",
        json!({"allOf": [{"enum": ["a", "b", "c"]}, {"enum": ["b", "c", "d"]}]}),
    );
    add(
        "allOf disjoint enums",
        json!({"allOf": [{"enum": ["a"]}, {"enum": ["b"]}]}),
    );
    add(
        "allOf string",
        json!({"type": "string", "allOf": [{"enum": ["x", "y"]}, {"enum": ["y"]}]}),
    );
    add(
        "required order",
        json!({"type": "object", "properties": {"z": {}, "a": {}, "m": {}, "b": {}}, "required": ["m", "z"]}),
    );
    add(
        "all optional",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}}),
    );
    add(
        "additional schema",
        json!({"type": "object", "properties": {"and": {}, "also": {}, "é": {}}, "additionalProperties": {"type": "integer"}}),
    );
    add(
        "additional true",
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": true}),
    );
    add(
        "additional only",
        json!({"additionalProperties": {"type": "string"}}),
    );
    add(
        "additional bad",
        json!({"type": "object", "additionalProperties": 3}),
    );
    add(
        "property names",
        json!({"properties": {"a b": {}, "x\"y": {}, "line\nbreak": {}, "root": {"type": "object", "properties": {"string": {"type": "integer"}}}, "space": {"type": "object", "properties": {"q": {}}}, "": {}, "*": {}, "number": {"type": "number"}}}),
    );
    add(
        "name clash",
        json!({"properties": {"a": {"properties": {"b": {"type": "string"}}}, "a-b": {"type": "integer"}}}),
    );
    add(
        "recursive ref",
        json!({"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}, "v": {"type": "integer"}}}}}),
    );
    add(
        "ref chain",
        json!({"properties": {"a": {"$ref": "#/definitions/A"}}, "definitions": {"A": {"$ref": "#/definitions/B"}, "B": {"type": "string", "maxLength": 2}}}),
    );
    add(
        "ref into array",
        json!({"properties": {"a": {"$ref": "#/$defs/list/1"}}, "$defs": {"list": [{"type": "string"}, {"type": "boolean"}]}}),
    );
    add(
        "ref out of range",
        json!({"properties": {"a": {"$ref": "#/$defs/list/7"}}, "$defs": {"list": [{}]}}),
    );
    add("ref external", json!({"$ref": "other.json#/a"}));
    add("ref not a string", json!({"$ref": 1}));
    add(
        "ref to non-schema",
        json!({"$ref": "#/$defs/x", "$defs": {"x": 3}}),
    );
    add(
        "properties not object",
        json!({"type": "object", "properties": []}),
    );
    add(
        "negative minItems",
        json!({"type": "array", "minItems": -1}),
    );
    add(
        "fractional maxLength",
        json!({"type": "string", "maxLength": 2.5}),
    );
    add("not a schema", json!(true));
    add("format not string", json!({"format": 1}));
    add(
        "pattern not string",
        json!({"type": "string", "pattern": 1}),
    );
    for pattern in PATTERNS {
        add(
            &format!("pattern {pattern}"),
            json!({"type": "string", "pattern": pattern}),
        );
    }
    add(
        "pattern on a property",
        json!({"properties": {"code": {"pattern": "^[A-Z]{2}(-[0-9]+)?$"}, "bad": {"pattern": "^\\d+$"}}}),
    );
    cases
}

/// Patterns the converter supports, those it accepts as any string and those it refuses.
const PATTERNS: &[&str] = &[
    "^[a-z]+$",
    "^abc$",
    "^a.b*c?$",
    "^(foo|bar)+$",
    "^(?:ab){2}$",
    "^x{2}y{,3}z{1,}w{2,4}$",
    "^[A-Z][a-z]{2,5}$",
    "^\"quoted\"$",
    "^\\.\\*\\(\\)$",
    "^\\x41\\u00e9\\t$",
    "^[^\\]]+$",
    "^((((a))))$",
    "^.{3}\\.$",
    "^(a|b){2}(a|b){2}$",
    "^(ab)*(ab)+$",
    "^[a-]+$",
    "^a\"{3}$",
    "^ab{0}c$",
    "^a{1}$",
    "^a{ 2 , 3 }$",
    "^é+$",
    "^(é)+$",
    "^日本*$",
    "^[é-ü]{2}$",
    "",
    "^$",
    "^",
    "abc",
    "^abc",
    "^\\d{3}$",
    "^[\\w]+$",
    "^(?=a)b$",
    "^a$b$",
    "^a{2,x}$",
    "^a{1,2,3}$",
    "^a{2$",
    "^a)$",
    "^(a$",
    "^*a$",
    "^[abc$",
    "^a\\$",
    "^\\$\\^$",
    "^{2}$",
    "^a|$",
    "^(|a)$",
    "^]$",
    "^}$",
    "^a{-1}$",
    "^a{99999999999}$",
];

/// Every shipped schema is converted exactly as llama.cpp does.
#[test]
fn shipped_schemas_match_llama_cpp() {
    check("shipped.jsonl", &shipped_cases());
}

/// Every schema troupe's tests use, and schemars types with bounds, match llama.cpp.
#[test]
fn test_schemas_match_llama_cpp() {
    check("tests.jsonl", &test_cases());
}

/// Each construct, and each refusal, matches llama.cpp.
#[test]
fn edge_cases_match_llama_cpp() {
    check("edge_cases.jsonl", &edge_cases());
}

// Random schemas.

fn property_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "a",
            "b",
            "name",
            "a b",
            "é",
            "space",
            "string",
            "root",
            "*",
            "",
            "x-kv",
            "item",
            "value",
            "ref",
            "additional",
            "q\"",
            "0"
        ])
        .prop_map(str::to_string),
        "[a-c]{1,3}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1000i64..1000).prop_map(|n| json!(n)),
        prop::sample::select(vec![
            0.1, 2.0, -0.0, 1e20, 1e-7, 123.456, 1e15, 1e16, 0.0001, 0.00001
        ])
        .prop_map(|f| json!(f)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[a\"\\\\\n\t\u{1}é日 ]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]{1,2}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn bound() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-1200i64..1200).prop_map(|n| json!(n)),
        prop::sample::select(vec![
            0i64,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1000,
            12345,
            -1,
            -9,
            -10,
            -100,
            1 << 31,
            1 << 53,
            i64::MAX - 1,
            i64::MIN + 1
        ])
        .prop_map(|n| json!(n)),
        prop::sample::select(vec![1.5, -2.5, 0.1, 1000.0, -0.5]).prop_map(|f| json!(f)),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(PATTERNS.to_vec()).prop_map(str::to_string),
        "\\^[ab.()\\[\\]{}*+?|,0-3é\"\\\\\\-^$:=xdu]{0,12}\\$",
    ]
}

fn count() -> impl Strategy<Value = i64> {
    prop_oneof![0i64..4, Just(-1), Just(1_000_000)]
}

fn leaf_schema() -> impl Strategy<Value = Value> {
    let string = (
        prop::option::of(count()),
        prop::option::of(count()),
        prop::option::of(pattern()),
        prop::option::of(prop::sample::select(vec![
            "date",
            "time",
            "date-time",
            "uuid",
            "uuid3",
            "email",
        ])),
    )
        .prop_map(|(min, max, pattern, format)| {
            let mut s = json!({"type": "string"});
            if let Some(min) = min {
                s["minLength"] = json!(min);
            }
            if let Some(max) = max {
                s["maxLength"] = json!(max);
            }
            if let Some(p) = pattern {
                s["pattern"] = json!(p);
            }
            if let Some(f) = format {
                s["format"] = json!(f);
            }
            s
        });
    let integer = (
        prop::option::of(bound()),
        prop::option::of(bound()),
        any::<bool>(),
    )
        .prop_map(|(min, max, exclusive)| {
            let mut s = json!({"type": "integer"});
            let (lo, hi) = if exclusive {
                ("exclusiveMinimum", "exclusiveMaximum")
            } else {
                ("minimum", "maximum")
            };
            if let Some(min) = min {
                s[lo] = min;
            }
            if let Some(max) = max {
                s[hi] = max;
            }
            s
        });
    prop_oneof![
        string,
        integer,
        Just(json!({"type": "number"})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "null"})),
        Just(json!({})),
        Just(json!({"type": "object"})),
        Just(json!({"type": "array"})),
        Just(json!({"$ref": "#/$defs/A"})),
        Just(json!({"$ref": "#/$defs/B"})),
        Just(json!({"type": ["integer", "string"]})),
        json_value().prop_map(|v| json!({"const": v})),
        prop::collection::vec(json_value(), 1..4).prop_map(|v| json!({"enum": v})),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    leaf_schema().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            (
                prop::collection::vec((property_name(), inner.clone()), 0..4),
                prop::collection::vec(property_name(), 0..3),
                prop_oneof![Just(None), Just(Some(json!(false))), Just(Some(json!(true))), inner.clone().prop_map(Some)],
                any::<bool>(),
            )
                .prop_map(|(props, required, additional, typed)| {
                    let mut s = json!({"properties": Value::Object(props.into_iter().collect()), "required": required});
                    if typed { s["type"] = json!("object"); }
                    if let Some(a) = additional { s["additionalProperties"] = a; }
                    s
                }),
            (inner.clone(), prop::option::of(count()), prop::option::of(count()))
                .prop_map(|(items, min, max)| {
                    let mut s = json!({"type": "array", "items": items});
                    if let Some(min) = min { s["minItems"] = json!(min); }
                    if let Some(max) = max { s["maxItems"] = json!(max); }
                    s
                }),
            prop::collection::vec(inner.clone(), 0..3).prop_map(|items| json!({"type": "array", "prefixItems": items})),
            (prop::sample::select(vec!["oneOf", "anyOf", "allOf"]), prop::collection::vec(inner.clone(), 1..4))
                .prop_map(|(key, alts)| json!({ key: alts })),
        ]
    })
}

/// A random schema with `$defs` `A` and `B` (which the leaves may refer to, `B` to itself).
fn document() -> impl Strategy<Value = Value> {
    (schema(), schema(), schema()).prop_map(|(root, a, b)| {
        let mut doc = match root {
            Value::Object(o) if !o.contains_key("$ref") => Value::Object(o),
            other => json!({"type": "object", "properties": {"root": other}}),
        };
        // A bare `$ref` as `A` could make `A` refer to itself through `$ref`s alone, which
        // crashes llama.cpp's converter in an `allOf` (see `SchemaGrammarError::RefCycle`).
        let a = match a {
            Value::Object(o) if o.contains_key("$ref") => {
                json!({"type": "array", "items": Value::Object(o)})
            }
            other => other,
        };
        doc["$defs"] = json!({"A": a, "B": {"anyOf": [b, {"$ref": "#/$defs/B"}]}});
        doc
    })
}

/// A fixed sample of random schemas (a deterministic runner), saved as golden fixtures.
#[test]
fn random_schemas_match_llama_cpp() {
    let mut runner = TestRunner::deterministic();
    let strategy = document();
    let cases: Vec<(String, Value)> = (0..400)
        .filter_map(|i| {
            let tree = strategy.new_tree(&mut runner).ok()?;
            Some((format!("random {i}"), tree.current()))
        })
        .collect();
    assert_eq!(cases.len(), 400);
    check("random.jsonl", &cases);
}

proptest! {
    #![proptest_config(Config { cases: 1500, ..Config::default() })]
    /// Any random schema converts as llama.cpp converts it, or both refuse.
    #[test]
    fn any_schema_matches_llama_cpp(schema in document()) {
        let (want, got) = (oracle(&schema), port(&schema));
        prop_assert_eq!(want, got, "{}", schema);
    }

    /// Any double as a `const` is written with llama.cpp's digits (nlohmann's Grisu2, which is
    /// not always the shortest).
    #[test]
    fn any_float_const_matches_llama_cpp(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
        let schema = json!({"const": f});
        let (want, got) = (oracle(&schema), port(&schema));
        prop_assert_eq!(want, got, "{}", schema);
    }
}
