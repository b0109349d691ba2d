//! MCP in a running team: an agent's call to an MCP server's tool is an `execute_tool` span
//! naming the server. The reference server comes from `.ci/run` (`TROUPE_MCP_EVERYTHING`).

use std::sync::Arc;

use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::protocol::trace::TraceLine;
use troupe::{AgentSpec, Team, TeamConfig, ToolRegistry, spawn_agent};
use troupe_cli::trace_tree::read_trace_file;
use troupe_mcp::{McpServerConfig, RegisterMcp};

use super::support::with_trace_file;

/// server-everything, or `None` with a note outside CI; under CI a missing one fails.
fn everything() -> Option<McpServerConfig> {
    match std::env::var("TROUPE_MCP_EVERYTHING") {
        Ok(path) if !path.is_empty() => Some(McpServerConfig::stdio(path).arg("stdio")),
        _ => {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "TROUPE_MCP_EVERYTHING is not set: under CI .ci/run installs the MCP servers"
            );
            eprintln!("skipped: TROUPE_MCP_EVERYTHING is not set; run .ci/run");
            None
        }
    }
}

#[test]
fn an_agents_mcp_call_is_an_execute_tool_span_naming_the_server() {
    let Some(server) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let answer = with_trace_file(&path, true, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let mut tools = ToolRegistry::new();
                tools.register_mcp("everything", server).await.unwrap();
                let model = ScriptedModel::new(
                    "scripted",
                    [
                        ScriptedReply::call("everything__echo", r#"{"message": "via mcp"}"#),
                        ScriptedReply::text("done"),
                    ],
                );
                let team = Team::start(TeamConfig::default()).await.unwrap();
                spawn_agent(&team, AgentSpec::new("a", Arc::new(model)).tools(tools))
                    .await
                    .unwrap();
                let answer = team.ask("a", "echo please").await.unwrap();
                team.shutdown().await;
                answer
            })
    });
    assert_eq!(answer, "done");
    let spans: Vec<_> = read_trace_file(&path)
        .unwrap()
        .lines
        .into_iter()
        .filter_map(|l| match l {
            TraceLine::Span(s) if s.name == "execute_tool" => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(spans.len(), 1, "{spans:?}");
    let span = &spans[0];
    assert_eq!(span.attributes["gen_ai.tool.name"], "everything__echo");
    assert_eq!(
        span.attributes["troupe.mcp.server"], "everything",
        "{span:?}"
    );
    assert!(
        span.attributes["gen_ai.tool.call.result"]
            .as_str()
            .unwrap()
            .contains("via mcp"),
        "{span:?}"
    );
    assert_eq!(span.status, "ok");
}

/// The `text` of a tool result's one content block, parsed as JSON.
fn result_json(result: &rmcp::model::CallToolResult) -> serde_json::Value {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let text = result.content[0].as_text().unwrap().text.clone();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn troupe_mcp_serve_compacts_and_expands_for_an_mcp_client() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;
    use serde_json::json;

    let Some(files) = super::support::corpus_files() else {
        return;
    };
    let corpus = files
        .iter()
        .find(|p| p.ends_with("swe-marshmallow.json"))
        .unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_troupe"));
    // `path` reads only beneath the server's root: the corpus's directory here.
    command.args(["mcp", "serve", "--root"]);
    command.arg(corpus.parent().unwrap());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "troupe");

    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["compact_transcript", "count_tokens", "expand_transcript"]
    );

    let call = |name: &'static str, args: serde_json::Value| {
        CallToolRequestParams::new(name).with_arguments(args.as_object().unwrap().clone())
    };
    let original = troupe_cli::transcript_file::TranscriptFile::read(corpus).unwrap();
    let original = serde_json::to_value(&original.messages).unwrap();
    let before = result_json(
        &client
            .call_tool(call("count_tokens", json!({"messages": original})))
            .await
            .unwrap(),
    )["tokens"]
        .as_u64()
        .unwrap();

    let compacted = result_json(
        &client
            .call_tool(call(
                "compact_transcript",
                json!({"path": corpus.display().to_string(), "window": 8192, "target": 0.4}),
            ))
            .await
            .unwrap(),
    );
    let report = &compacted["report"];
    assert!(report["tokens_before"].as_u64().unwrap() > report["tokens_after"].as_u64().unwrap());
    let after = result_json(
        &client
            .call_tool(call(
                "count_tokens",
                json!({"messages": compacted["messages"]}),
            ))
            .await
            .unwrap(),
    )["tokens"]
        .as_u64()
        .unwrap();
    assert!(after < before, "{after} < {before}");

    let expanded = result_json(
        &client
            .call_tool(call(
                "expand_transcript",
                json!({"archive_id": compacted["archive_id"], "messages": compacted["messages"]}),
            ))
            .await
            .unwrap(),
    );
    assert_eq!(expanded["messages"], original);

    let unknown = client
        .call_tool(call("expand_transcript", json!({"archive_id": "nope"})))
        .await
        .unwrap();
    assert_eq!(unknown.is_error, Some(true));
    assert!(format!("{unknown:?}").contains("no archive `nope`"));
    client.cancel().await.unwrap();
}
