//! A server's `notifications/tools/list_changed` refreshes the tools a registry offers; a server
//! that changes its tools without telling is re-listed when it refuses a call.
//!
//! The pinned `server-everything` sends the notification only while it starts (it registers
//! the tools that depend on the client's capabilities once initialized), never on a call, so
//! these tests drive `tests/changing_tools_server.py`, a server written with the PyPI `mcp`
//! package whose `grow` tool changes its list.

use std::time::Duration;

use serde_json::json;
use troupe_mcp::RegisterMcp;
use troupe_tools::{ToolFailure, ToolRegistry};

use super::support::{changing_tools, run};

/// The registry's tool names once `done` holds for them (the refresh runs in the background,
/// after the notification); the names as they are when it has not after 20 s.
async fn names_once(registry: &ToolRegistry, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let names = registry.names();
        if done(&names) || tokio::time::Instant::now() >= deadline {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_list_changed_notification_adds_and_removes_tools() {
    let Some(config) = changing_tools() else {
        return;
    };
    let mut registry = ToolRegistry::new();
    registry
        .register_fn("local", "A native tool.", |_: troupe_tools::NoArgs| async {
            Ok("local")
        })
        .unwrap();
    let server = registry.register_mcp("changing", config).await.unwrap();
    let mut before = registry.names();
    before.sort();
    assert_eq!(
        before,
        [
            "changing__drop_silently",
            "changing__grow",
            "changing__whisper",
            "local"
        ]
    );
    // A copy handed out earlier (as an agent hands one to each turn) sees the change too.
    let copy = registry.clone();

    let grown = run(&registry, "changing__grow", json!({})).await;
    assert!(!grown.is_error(), "{}", grown.content);
    let after = names_once(&copy, |names| {
        names.iter().any(|n| n == "changing__shout")
            && !names.iter().any(|n| n == "changing__whisper")
    })
    .await;
    assert!(after.contains(&"changing__shout".to_string()), "{after:?}");
    assert!(
        !after.contains(&"changing__whisper".to_string()),
        "{after:?}"
    );
    assert!(after.contains(&"local".to_string()), "{after:?}");
    assert!(
        server.tool_names().contains(&"changing__shout".to_string()),
        "{:?}",
        server.tool_names()
    );

    let shout = copy
        .definitions()
        .into_iter()
        .find(|d| d.name == "changing__shout")
        .unwrap();
    assert_eq!(shout.description, "Say the text loudly.");
    assert_eq!(shout.parameters["required"], json!(["text"]));
    // The new tool goes through the one dispatch: schema-checked, then called.
    let bad = run(&copy, "changing__shout", json!({"text": 3})).await;
    assert_eq!(
        bad.failure(),
        Some(&ToolFailure::InvalidArguments {
            field: Some("text".into())
        }),
        "{}",
        bad.content
    );
    let loud = run(&copy, "changing__shout", json!({"text": "hello"})).await;
    assert!(!loud.is_error(), "{}", loud.content);
    assert!(loud.content.contains("HELLO!"), "{}", loud.content);

    // The removed tool is an unknown tool now, and the message names the tools there are.
    let gone = run(&copy, "changing__whisper", json!({"text": "psst"})).await;
    assert_eq!(
        gone.failure(),
        Some(&ToolFailure::UnknownTool),
        "{}",
        gone.content
    );
    assert!(gone.content.contains("changing__shout"), "{}", gone.content);
}

#[tokio::test]
async fn a_tool_the_server_dropped_silently_is_relisted_after_a_refused_call() {
    let Some(config) = changing_tools() else {
        return;
    };
    let mut registry = ToolRegistry::new();
    registry.register_mcp("changing", config).await.unwrap();
    let dropped = run(&registry, "changing__drop_silently", json!({})).await;
    assert!(!dropped.is_error(), "{}", dropped.content);
    // No notification: the registry still offers `whisper`, and the server refuses it.
    let refused = run(&registry, "changing__whisper", json!({"text": "psst"})).await;
    assert!(refused.is_error(), "{}", refused.content);
    assert_eq!(
        refused.failure(),
        Some(&ToolFailure::Refused),
        "{}",
        refused.content
    );
    // The refused call re-listed the tools before it returned.
    let after = registry.names();
    assert!(
        !after.contains(&"changing__whisper".to_string()),
        "{after:?}"
    );
    assert!(after.contains(&"changing__grow".to_string()), "{after:?}");
}

#[tokio::test]
async fn refreshing_keeps_the_names_of_tools_still_listed() {
    let Some(config) = super::support::everything() else {
        return;
    };
    let mut registry = ToolRegistry::new();
    let server = registry.register_mcp("everything", config).await.unwrap();
    server.refresh().await.unwrap();
    let names = registry.names();
    assert!(names.contains(&"everything__echo".to_string()), "{names:?}");
    assert_eq!(names, server.tool_names());
    assert_eq!(
        server.registered_name("get-sum").as_deref(),
        Some("everything__get-sum")
    );
}

#[tokio::test]
async fn a_new_tool_named_like_a_registered_one_gets_a_suffix() {
    let Some(config) = changing_tools() else {
        return;
    };
    let mut registry = ToolRegistry::new();
    registry
        .register_fn(
            "changing__shout",
            "A native tool.",
            |_: troupe_tools::NoArgs| async { Ok("native") },
        )
        .unwrap();
    let server = registry.register_mcp("changing", config).await.unwrap();
    let grown = run(&registry, "changing__grow", json!({})).await;
    assert!(!grown.is_error(), "{}", grown.content);
    let after = names_once(&registry, |names| {
        names.iter().any(|n| n == "changing__shout_2")
    })
    .await;
    assert!(
        after.contains(&"changing__shout_2".to_string()),
        "{after:?}"
    );
    assert_eq!(
        server.registered_name("shout").as_deref(),
        Some("changing__shout_2")
    );
    let native = run(&registry, "changing__shout", json!({})).await;
    assert_eq!(native.content, "native");
    let remote = run(&registry, "changing__shout_2", json!({"text": "hi"})).await;
    assert!(remote.content.contains("HI!"), "{}", remote.content);
}
