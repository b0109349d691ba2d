//! Tool definitions match the OpenAI function-calling JSON shape.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use troupe_tools::{NoArgs, ToolError, ToolRegistry, builtin};

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Range {
    /// First line.
    start: u32,
    /// Last line.
    end: u32,
}

/// Arguments of the test tool.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct SearchArgs {
    /// What to look for.
    query: String,
    /// Where to look.
    range: Option<Range>,
    /// A field literally named "title", which must survive title-stripping.
    title: Option<String>,
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry
        .register_fn("search", "Search things.", |_: SearchArgs| async {
            Ok::<_, ToolError>("")
        })
        .unwrap()
        .register_fn("ping", "Ping.", |_: NoArgs| async {
            Ok::<_, ToolError>("pong")
        })
        .unwrap();
    registry
}

fn walk<'a>(value: &'a Value, out: &mut Vec<(&'a str, &'a Value)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                out.push((k.as_str(), v));
                walk(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
        _ => {}
    }
}

#[test]
fn definitions_have_the_documented_openai_shape() {
    for definition in registry()
        .definitions()
        .iter()
        .chain(builtin::file_tools().definitions().iter())
    {
        let json = definition.to_openai_json();
        assert_eq!(json["type"], "function");
        let function = json["function"].as_object().unwrap();
        let mut keys: Vec<&str> = function.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["description", "name", "parameters"]);
        assert!(json["function"]["name"].is_string());
        assert!(!json["function"]["description"].as_str().unwrap().is_empty());
        let parameters = &json["function"]["parameters"];
        assert_eq!(parameters["type"], "object", "{}", definition.name);
        assert!(parameters["properties"].is_object(), "{}", definition.name);
        if let Some(required) = parameters.get("required") {
            for name in required.as_array().unwrap() {
                assert!(
                    parameters["properties"]
                        .get(name.as_str().unwrap())
                        .is_some()
                );
            }
        }
    }
}

#[test]
fn schemas_are_inlined_and_free_of_generator_noise() {
    let definitions = registry().definitions();
    let search = &definitions[0].parameters;
    let mut keys = Vec::new();
    walk(search, &mut keys);
    for (key, value) in &keys {
        assert!(
            !["$schema", "$ref", "$defs", "definitions"].contains(key),
            "{key} in {search}"
        );
        if *key == "format" {
            panic!("non-standard format {value} left in {search}");
        }
    }
    // A property named "title" is data, not the `title` keyword.
    assert!(search["properties"]["title"].is_object());
    assert!(search.get("title").is_none());
    // Nested struct inlined, doc comments kept as descriptions, optional fields not required.
    assert_eq!(
        search["properties"]["query"]["description"],
        "What to look for."
    );
    assert_eq!(search["required"], json!(["query"]));
    let range = search["properties"]["range"].to_string();
    assert!(
        range.contains("\"start\"") && range.contains("First line."),
        "{range}"
    );
}

#[test]
fn a_tool_without_arguments_gets_an_empty_object_schema() {
    let definitions = registry().definitions();
    assert_eq!(definitions[1].name, "ping");
    assert_eq!(definitions[1].parameters["type"], "object");
    assert_eq!(definitions[1].parameters["properties"], json!({}));
}

#[test]
fn descriptions_are_unwrapped_and_null_defaults_dropped() {
    let definitions = builtin::file_tools().definitions();
    let edit = &definitions[2];
    assert_eq!(edit.name, "edit_file");
    assert!(
        edit.parameters.get("description").is_none(),
        "the root repeats the function's"
    );
    let old = edit.parameters["properties"]["old_string"]["description"]
        .as_str()
        .unwrap();
    assert!(!old.contains('\n') && old.contains("exactly once"), "{old}");
    assert_eq!(
        edit.parameters["properties"]["replace_all"]["default"],
        false
    );
    let read = &definitions[0].parameters;
    assert!(
        read["properties"]["start_line"].get("default").is_none(),
        "{read}"
    );
    assert_eq!(
        read["properties"]["start_line"]["type"],
        json!(["integer", "null"])
    );
}
