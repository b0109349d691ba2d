//! Tools whose parameters are a JSON Schema given at run time (`JsonTool`).

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use troupe_tools::{JsonTool, RegistryError, ToolContext, ToolError, ToolFailure, ToolRegistry};

use super::support::{run, workspace};

struct Repeat {
    schema: Value,
}

#[async_trait]
impl JsonTool for Repeat {
    fn name(&self) -> &str {
        "repeat"
    }
    fn description(&self) -> &str {
        "Repeat a word."
    }
    fn parameters(&self) -> &Value {
        &self.schema
    }
    async fn call(
        &self,
        _ctx: &ToolContext,
        args: Map<String, Value>,
    ) -> Result<String, ToolError> {
        let word = args["word"].as_str().unwrap_or_default();
        let times = args["times"].as_u64().unwrap_or(1) as usize;
        Ok(word.repeat(times))
    }
}

fn repeat() -> Repeat {
    Repeat {
        schema: json!({
            "type": "object",
            "properties": {
                "word": {"type": "string"},
                "times": {"type": "integer", "minimum": 1}
            },
            "required": ["word", "times"],
            "additionalProperties": false
        }),
    }
}

#[tokio::test]
async fn arguments_are_checked_against_the_schema_before_the_call() {
    let (_dir, ctx) = workspace();
    let mut registry = ToolRegistry::new();
    registry.register_json(repeat()).unwrap();
    assert_eq!(registry.definitions()[0].parameters, repeat().schema);
    let ok = run(&registry, &ctx, "repeat", json!({"word": "ab", "times": 3})).await;
    assert_eq!(ok.content, "ababab");
    let wrong = run(
        &registry,
        &ctx,
        "repeat",
        json!({"word": "ab", "times": "3"}),
    )
    .await;
    assert_eq!(
        wrong.failure(),
        Some(&ToolFailure::InvalidArguments {
            field: Some("times".into())
        }),
        "{}",
        wrong.content
    );
    assert!(
        wrong.content.contains("times (integer, required)"),
        "{}",
        wrong.content
    );
    let missing = run(&registry, &ctx, "repeat", json!({"times": 2})).await;
    assert!(
        missing.content.contains("missing field \"word\""),
        "{}",
        missing.content
    );
    let low = run(&registry, &ctx, "repeat", json!({"word": "a", "times": 0})).await;
    assert!(
        low.content.contains("must be at least 1"),
        "{}",
        low.content
    );
}

#[test]
fn a_schema_that_is_not_an_object_is_refused() {
    let mut registry = ToolRegistry::new();
    let err = registry
        .register_json(Repeat {
            schema: json!({"type": "string"}),
        })
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::ArgsNotAnObject { .. }),
        "{err}"
    );
    registry.register_json(repeat()).unwrap();
    assert!(matches!(
        registry.register_json(repeat()).unwrap_err(),
        RegistryError::DuplicateTool(_)
    ));
}
