//! A `ToolSource`: tools whose list changes after registration (an MCP server's).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use troupe_tools::{
    JsonTool, NoArgs, RegistryError, ToolContext, ToolError, ToolFailure, ToolRegistry, ToolSource,
};

use super::support::{run, workspace};

/// A tool answering `NAME:word`, or sleeping `sleep_ms` first.
struct Named {
    name: String,
    schema: Value,
    sleep_ms: u64,
}

#[async_trait]
impl JsonTool for Named {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "Say a word."
    }
    fn parameters(&self) -> &Value {
        &self.schema
    }
    async fn call(
        &self,
        _ctx: &ToolContext,
        args: Map<String, Value>,
    ) -> Result<String, ToolError> {
        tokio::time::sleep(Duration::from_millis(self.sleep_ms)).await;
        Ok(format!(
            "{}:{}",
            self.name,
            args["word"].as_str().unwrap_or("")
        ))
    }
}

fn tool(name: &str) -> Arc<dyn JsonTool> {
    Arc::new(Named {
        name: name.to_string(),
        schema: json!({
            "type": "object",
            "properties": {"word": {"type": "string"}},
            "required": ["word"]
        }),
        sleep_ms: 0,
    })
}

/// A list swapped from outside, as an MCP connection does on `tools/list_changed`.
#[derive(Default)]
struct Swappable(RwLock<Vec<Arc<dyn JsonTool>>>);

impl Swappable {
    fn set(&self, tools: Vec<Arc<dyn JsonTool>>) {
        *self.0.write().unwrap() = tools;
    }
}

impl ToolSource for Swappable {
    fn label(&self) -> &str {
        "the test source"
    }
    fn tools(&self) -> Arc<[Arc<dyn JsonTool>]> {
        self.0.read().unwrap().clone().into()
    }
}

fn names(registry: &ToolRegistry) -> Vec<String> {
    registry.names()
}

#[tokio::test]
async fn registries_and_their_clones_offer_what_the_source_lists_now() {
    let (_dir, ctx) = workspace();
    let source = Arc::new(Swappable::default());
    source.set(vec![tool("s__a"), tool("s__b")]);
    let mut registry = ToolRegistry::new();
    registry
        .register_fn("local", "Native.", |_: NoArgs| async { Ok("local") })
        .unwrap();
    registry.register_source(source.clone()).unwrap();
    let copy = registry.clone();
    assert_eq!(names(&copy), ["local", "s__a", "s__b"]);

    source.set(vec![tool("s__a"), tool("s__c")]);
    assert_eq!(names(&copy), ["local", "s__a", "s__c"]);
    let definitions = copy.definitions();
    assert_eq!(definitions[2].name, "s__c");
    assert_eq!(definitions[2].parameters["required"], json!(["word"]));
    let added = run(&copy, &ctx, "s__c", json!({"word": "hi"})).await;
    assert_eq!(added.content, "s__c:hi");
    // Arguments are checked against the new tool's schema like any tool's.
    let bad = run(&copy, &ctx, "s__c", json!({"word": 1})).await;
    assert_eq!(
        bad.failure(),
        Some(&ToolFailure::InvalidArguments {
            field: Some("word".into())
        }),
        "{}",
        bad.content
    );
    let gone = run(&copy, &ctx, "s__b", json!({"word": "hi"})).await;
    assert_eq!(gone.failure(), Some(&ToolFailure::UnknownTool));
    assert!(gone.content.contains("did you mean"), "{}", gone.content);
    assert!(
        gone.content.contains("local, s__a, s__c"),
        "{}",
        gone.content
    );
}

#[tokio::test]
async fn registered_tools_win_over_a_source_listing_the_same_name() {
    let (_dir, ctx) = workspace();
    let source = Arc::new(Swappable::default());
    source.set(vec![tool("s__a")]);
    let mut registry = ToolRegistry::new();
    registry.register_source(source.clone()).unwrap();
    // Taken while the source lists it…
    assert_eq!(
        registry
            .register_fn("s__a", "Native.", |_: NoArgs| async { Ok("native") })
            .unwrap_err(),
        RegistryError::DuplicateTool("s__a".into())
    );
    registry
        .register_fn("local", "Native.", |_: NoArgs| async { Ok("native") })
        .unwrap();
    // …and a name the source lists later that is already registered is left out, as are
    // names no model could call and schemas that are not objects.
    let not_object = Named {
        name: "s__list".into(),
        schema: json!({"type": "array"}),
        sleep_ms: 0,
    };
    source.set(vec![
        tool("local"),
        tool("s__a"),
        tool("bad name"),
        Arc::new(not_object),
        tool("s__a"),
    ]);
    assert_eq!(names(&registry), ["s__a", "local"]);
    let local = run(&registry, &ctx, "local", json!({})).await;
    assert_eq!(local.content, "native");
}

#[tokio::test]
async fn a_source_is_checked_at_registration() {
    let source = Arc::new(Swappable::default());
    source.set(vec![tool("local")]);
    let mut registry = ToolRegistry::new();
    registry
        .register_fn("local", "Native.", |_: NoArgs| async { Ok("native") })
        .unwrap();
    assert_eq!(
        registry.register_source(source.clone()).unwrap_err(),
        RegistryError::DuplicateTool("local".into())
    );
    source.set(vec![tool("bad name")]);
    assert_eq!(
        registry.register_source(source.clone()).unwrap_err(),
        RegistryError::InvalidName("bad name".into())
    );
    source.set(vec![tool("s__a")]);
    registry.register_source(source.clone()).unwrap();
    assert!(matches!(
        registry.register_source(source.clone()).unwrap_err(),
        RegistryError::DuplicateSource(label) if label == "the test source"
    ));
    assert_eq!(names(&registry), ["local", "s__a"]);
}

#[tokio::test]
async fn removed_source_tools_stay_removed_and_timeouts_apply() {
    let (_dir, ctx) = workspace();
    let source = Arc::new(Swappable::default());
    source.set(vec![
        tool("s__a"),
        Arc::new(Named {
            name: "s__slow".into(),
            schema: json!({"type": "object", "properties": {"word": {"type": "string"}}}),
            sleep_ms: 5_000,
        }),
    ]);
    let mut all = ToolRegistry::new();
    all.register_source(source.clone()).unwrap();
    let mut only_slow = all.clone();
    assert!(only_slow.remove("s__a"));
    assert!(!only_slow.remove("s__a"));
    source.set(
        source
            .tools()
            .iter()
            .cloned()
            .chain([tool("s__b")])
            .collect(),
    );
    assert_eq!(names(&only_slow), ["s__slow", "s__b"]);
    assert_eq!(names(&all), ["s__a", "s__slow", "s__b"]);

    only_slow
        .set_timeout("s__slow", Duration::from_millis(50))
        .unwrap();
    assert_eq!(
        only_slow.timeout_of("s__slow"),
        Some(Duration::from_millis(50))
    );
    let slow = run(&only_slow, &ctx, "s__slow", json!({"word": "x"})).await;
    assert_eq!(
        slow.failure(),
        Some(&ToolFailure::TimedOut),
        "{}",
        slow.content
    );

    // Merging a registry holding the same source keeps one source, offering what either does.
    let mut merged = only_slow.clone();
    let mut just_a = all.clone();
    just_a.remove("s__slow");
    just_a.remove("s__b");
    merged.merge(&just_a).unwrap();
    assert_eq!(names(&merged), ["s__a", "s__slow", "s__b"]);
    assert_eq!(
        merged.merge(&all).unwrap_err(),
        RegistryError::DuplicateTool("s__a".into())
    );
}

#[tokio::test]
async fn retain_keeps_a_selection_of_a_source_as_it_was_chosen() {
    let source = Arc::new(Swappable::default());
    source.set(vec![tool("s__a"), tool("s__b")]);
    let mut all = ToolRegistry::new();
    all.register_fn("local", "Native.", |_: NoArgs| async { Ok("native") })
        .unwrap();
    all.register_source(source.clone()).unwrap();
    let mut just_b = all.clone();
    just_b.retain(|name| name == "s__b");
    assert_eq!(names(&just_b), ["s__b"]);
    // A tool the source lists later is not part of the selection; one that goes, goes.
    source.set(vec![tool("s__a"), tool("s__b"), tool("s__c")]);
    assert_eq!(names(&just_b), ["s__b"]);
    assert_eq!(names(&all), ["local", "s__a", "s__b", "s__c"]);
    source.set(vec![tool("s__a")]);
    assert!(just_b.is_empty());
    source.set(vec![tool("s__a"), tool("s__b")]);
    assert_eq!(names(&just_b), ["s__b"]);

    // Two selections of one source merge into one source offering both.
    let mut just_a = all.clone();
    just_a.retain(|name| name == "s__a");
    just_b.merge(&just_a).unwrap();
    assert_eq!(names(&just_b), ["s__a", "s__b"]);
    source.set(vec![tool("s__a"), tool("s__b"), tool("s__d")]);
    assert_eq!(names(&just_b), ["s__a", "s__b"]);
}
