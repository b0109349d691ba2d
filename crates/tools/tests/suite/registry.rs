//! Registration rules: unique valid names, object arguments, timeouts, merging, output rendering.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use troupe_tools::{DEFAULT_TIMEOUT, RegistryError, ToolError, ToolRegistry, builtin};

use super::support::{run, workspace};

#[derive(Deserialize, JsonSchema)]
struct Echo {
    text: String,
}

#[derive(Serialize)]
struct Pair {
    a: u32,
    b: &'static str,
}

fn echo_registry(name: &str) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry
        .register_fn(name, "Echo.", |args: Echo| async move {
            Ok::<_, ToolError>(args.text)
        })
        .unwrap();
    registry
}

#[test]
fn a_duplicate_name_is_an_error_naming_the_tool() {
    let mut registry = echo_registry("echo");
    let err = registry
        .register_fn("echo", "Again.", |args: Echo| async move {
            Ok::<_, ToolError>(args.text)
        })
        .unwrap_err();
    assert_eq!(err, RegistryError::DuplicateTool("echo".into()));
    assert!(err.to_string().contains("\"echo\""), "{err}");
    assert_eq!(
        builtin::file_tools()
            .register(builtin::ReadFile)
            .unwrap_err()
            .to_string(),
        "a tool named \"read_file\" is already registered; tool names must be unique"
    );
}

#[test]
fn merge_refuses_duplicates_without_adding_anything() {
    let mut registry = echo_registry("echo");
    let mut other = echo_registry("other");
    other.merge(&echo_registry("echo")).unwrap();
    assert_eq!(
        registry.merge(&other),
        Err(RegistryError::DuplicateTool("echo".into()))
    );
    assert_eq!(registry.names(), ["echo"]);
    registry.merge(&builtin::file_tools()).unwrap();
    assert_eq!(
        registry.names(),
        [
            "echo",
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "grep"
        ]
    );
}

#[test]
fn invalid_names_and_non_object_arguments_are_refused() {
    let mut registry = ToolRegistry::new();
    let err = registry
        .register_fn("read file", "Bad name.", |a: Echo| async move {
            Ok::<_, ToolError>(a.text)
        })
        .unwrap_err();
    assert_eq!(err, RegistryError::InvalidName("read file".into()));
    let err = registry
        .register_fn("scalar", "Takes a string.", |a: String| async move {
            Ok::<_, ToolError>(a)
        })
        .unwrap_err();
    assert!(matches!(err, RegistryError::ArgsNotAnObject { ref tool, .. } if tool == "scalar"));
    assert!(registry.is_empty());
}

#[test]
fn timeouts_default_to_sixty_seconds_and_can_be_set_per_tool() {
    let mut registry = echo_registry("echo");
    assert_eq!(DEFAULT_TIMEOUT, Duration::from_secs(60));
    assert_eq!(registry.timeout_of("echo"), Some(Duration::from_secs(60)));
    registry
        .set_timeout("echo", Duration::from_secs(5))
        .unwrap();
    assert_eq!(registry.timeout_of("echo"), Some(Duration::from_secs(5)));
    assert_eq!(
        registry.set_timeout("nope", Duration::from_secs(1)),
        Err(RegistryError::UnknownTool("nope".into()))
    );
    let shell = builtin::shell_tool(builtin::ShellConfig {
        timeout: Duration::from_secs(300),
        ..Default::default()
    });
    registry.register(shell).unwrap();
    assert!(registry.timeout_of("shell").unwrap() > Duration::from_secs(300));
}

#[test]
fn names_keep_registration_order_and_remove_works() {
    let mut registry = builtin::file_tools();
    assert_eq!(
        registry.names(),
        ["read_file", "write_file", "edit_file", "list_dir", "grep"]
    );
    assert!(registry.contains("grep"));
    assert!(registry.remove("grep"));
    assert!(!registry.contains("grep"));
    assert!(!registry.remove("grep"));
    assert!(
        !builtin::file_tools().contains("shell"),
        "shell must be opt-in"
    );
    assert!(
        !builtin::file_tools().contains("http_get"),
        "http_get must be opt-in"
    );
}

#[tokio::test]
async fn string_output_is_verbatim_and_other_output_is_compact_json() {
    let (_dir, ctx) = workspace();
    let mut registry = echo_registry("echo");
    registry
        .register_fn("pair", "Pair.", |_: troupe_tools::NoArgs| async {
            Ok::<_, ToolError>(Pair { a: 1, b: "x\"y" })
        })
        .unwrap();
    let result = run(
        &registry,
        &ctx,
        "echo",
        json!({"text": "hello \"world\"\n"}),
    )
    .await;
    assert!(!result.is_error());
    assert_eq!(result.content, "hello \"world\"\n");
    let result = run(&registry, &ctx, "pair", json!({})).await;
    assert_eq!(result.content, r#"{"a":1,"b":"x\"y"}"#);
}

#[tokio::test]
async fn a_closure_tool_with_context_sees_the_call_id_and_root() {
    let (dir, ctx) = workspace();
    let mut registry = ToolRegistry::new();
    registry
        .register_fn_with_context(
            "whoami",
            "Who am I.",
            |ctx: troupe_tools::ToolContext, _: troupe_tools::NoArgs| async move {
                Ok::<_, ToolError>(format!(
                    "{} {} {}",
                    ctx.agent,
                    ctx.tool_call_id,
                    ctx.root.display()
                ))
            },
        )
        .unwrap();
    let result = run(&registry, &ctx, "whoami", json!({})).await;
    assert_eq!(
        result.content,
        format!("tester call_1 {}", dir.path().display())
    );
}

#[test]
fn truncation_keeps_utf8_intact_and_leaves_short_output_alone() {
    let short = "héllo".to_string();
    assert_eq!(troupe_protocol::cap_output(short.clone(), 100), short);
    let long = "é".repeat(1000);
    let cut = troupe_protocol::cap_output(long, 101);
    assert!(cut.contains("the original was 2000 bytes"), "{cut}");
    assert!(cut.starts_with('é') && cut.ends_with('é'));
}
