//! The JSONL trace file: what a real team run writes, and what it must never write.

use std::collections::HashMap;

use troupe::protocol::trace::SpanLine;

use super::support::trace::{block_on, spans};
use super::support::{run_scripted_team, with_trace_file};

#[test]
fn a_team_run_writes_one_trace_with_genai_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let answer = with_trace_file(&path, false, || block_on(run_scripted_team()));
    assert_eq!(answer, "Crumb & Co.: fresh every morning.");

    let spans = spans(&path);
    let count = |name: &str| spans.iter().filter(|s| s.name == name).count();
    assert_eq!(count("invoke_agent"), 3, "coordinator, namer, copywriter");
    assert_eq!(count("chat"), 4, "two coordinator calls, one per worker");
    assert_eq!(count("execute_tool"), 2);

    // One user request is one trace, across agents.
    let traces: std::collections::BTreeSet<&str> =
        spans.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    let by_id: HashMap<&str, &SpanLine> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    assert_eq!(by_id.len(), spans.len(), "span ids are unique");
    for chat in spans.iter().filter(|s| s.name == "chat") {
        let parent = by_id[chat.parent_span_id.as_deref().unwrap()];
        assert_eq!(parent.name, "invoke_agent");
        assert_eq!(chat.attributes["gen_ai.operation.name"], "chat");
        assert!(
            chat.attributes["gen_ai.request.model"]
                .as_str()
                .unwrap()
                .starts_with("scripted-")
        );
        assert!(chat.attributes["gen_ai.usage.input_tokens"].is_u64());
        assert!(chat.attributes["gen_ai.usage.output_tokens"].is_u64());
        assert!(chat.end_time_unix_nano >= chat.start_time_unix_nano);
        assert_eq!(chat.status, "ok");
    }
    let root = spans
        .iter()
        .find(|s| s.name == "invoke_agent" && s.attributes["gen_ai.agent.name"] == "coordinator")
        .unwrap();
    assert_eq!(root.parent_span_id, None);
    assert_eq!(root.attributes["troupe.trace_id"], root.trace_id.as_str());

    // Each agent's spans name its conversation, for trace UIs that group by it; agents keep
    // conversations of their own.
    let conversations: std::collections::BTreeSet<&str> = spans
        .iter()
        .filter(|s| s.name == "invoke_agent")
        .map(|s| {
            let id = s.attributes["gen_ai.conversation.id"].as_str().unwrap();
            assert_eq!(s.attributes["session.id"].as_str(), Some(id));
            let agent = s.attributes["gen_ai.agent.name"].as_str().unwrap();
            assert!(id.starts_with(agent), "{id} is not {agent}'s");
            id
        })
        .collect();
    assert_eq!(conversations.len(), 3, "{conversations:?}");
}

#[test]
fn secrets_never_reach_the_trace_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secrets.jsonl");
    with_trace_file(&path, true, || {
        let span = tracing::info_span!(
            target: "troupe_test",
            "chat",
            api_key = "sk-live-SECRET1234567890",
            "http.request.header.authorization" = "Bearer SECRET-bearer-token",
            access_token = "SECRET-access",
            note = "retrying with Authorization: SECRET-header-value",
            "gen_ai.usage.input_tokens" = 12_u64,
        );
        let _entered = span.enter();
        tracing::error!(target: "troupe_test", error = "401 from server: key sk-abcdefSECRETxyz is invalid", "model call failed");
        tracing::warn!(target: "troupe_test", header = "Bearer SECRET-in-event", "sent");
    });
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("SECRET"), "a secret leaked:\n{text}");
    let spans = spans(&path);
    assert_eq!(spans[0].attributes["api_key"], "[redacted]");
    assert_eq!(spans[0].attributes["access_token"], "[redacted]");
    // Token counts are not tokens.
    assert_eq!(spans[0].attributes["gen_ai.usage.input_tokens"], 12);
    assert_eq!(spans[0].status, "error");
    assert_eq!(spans[0].events.len(), 2);
}

#[test]
fn message_content_is_recorded_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    for record_content in [false, true] {
        let path = dir.path().join(format!("content-{record_content}.jsonl"));
        with_trace_file(&path, record_content, || {
            let _span = tracing::info_span!(
            target: "troupe_test",
                "chat",
                "gen_ai.input.messages" = r#"[{"role":"user","content":"private words"}]"#,
                "gen_ai.output.messages" = "more private words",
                "gen_ai.request.model" = "m",
            )
            .entered();
        });
        let span = spans(&path).remove(0);
        assert_eq!(
            span.attributes.contains_key("gen_ai.input.messages"),
            record_content
        );
        assert_eq!(
            span.attributes.contains_key("gen_ai.output.messages"),
            record_content
        );
        assert_eq!(span.attributes["gen_ai.request.model"], "m");
    }
}

#[test]
fn a_trace_id_field_names_the_trace_and_children_inherit_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ids.jsonl");
    let trace = "0123456789abcdef0123456789abcdef";
    with_trace_file(&path, false, || {
        let outer =
            tracing::info_span!(target: "troupe_test", "invoke_agent", "troupe.trace_id" = trace)
                .entered();
        tracing::info_span!(target: "troupe_test", "chat").in_scope(|| {});
        drop(outer);
        tracing::info_span!(target: "troupe_test", "other_root").in_scope(|| {});
    });
    let spans = spans(&path);
    let get = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    assert_eq!(get("invoke_agent").trace_id, trace);
    assert_eq!(get("chat").trace_id, trace);
    assert_eq!(
        get("chat").parent_span_id.as_deref(),
        Some(get("invoke_agent").span_id.as_str())
    );
    assert_ne!(
        get("other_root").trace_id,
        trace,
        "a new root gets its own trace"
    );
}

/// A failed tool call and a failed model call mark their spans with `error.type`, so the file
/// says `status: error` and `troupe trace` shows them as errors.
#[test]
fn failed_tool_and_model_calls_are_errors_with_an_error_type() {
    use std::sync::Arc;

    use troupe::models::{ScriptedModel, ScriptedReply};
    use troupe::protocol::ModelError;
    use troupe::{AgentSpec, Team, TeamConfig, ToolError, ToolRegistry, spawn_agent};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Topic {
        topic: String,
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("errors.jsonl");
    with_trace_file(&path, false, || {
        block_on(async {
            let mut tools = ToolRegistry::new();
            tools
                .register_fn("lookup", "Look a topic up.", |a: Topic| async move {
                    Err::<String, _>(ToolError::respond(format!("no notes about `{}`", a.topic)))
                })
                .unwrap();
            let model = ScriptedModel::new(
                "scripted-failing",
                [
                    ScriptedReply::ToolCalls(vec![
                        ("lookup".into(), r#"{"topic": "croissants"}"#.into()),
                        ("no_such_tool".into(), "{}".into()),
                    ]),
                    ScriptedReply::text("Nothing found."),
                    ScriptedReply::Error(ModelError::RateLimited("slow down".into())),
                ],
            );
            let team = Team::start(TeamConfig::default()).await.unwrap();
            spawn_agent(&team, AgentSpec::new("a", Arc::new(model)).tools(tools))
                .await
                .unwrap();
            assert_eq!(
                team.ask("a", "Croissants?").await.unwrap(),
                "Nothing found."
            );
            assert!(team.ask("a", "Again?").await.is_err());
            team.shutdown().await;
        })
    });

    let spans = spans(&path);
    let tool = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == "execute_tool" && s.attributes["gen_ai.tool.name"] == name)
            .unwrap_or_else(|| panic!("no span for {name}: {spans:#?}"))
    };
    assert_eq!(tool("lookup").status, "error");
    assert_eq!(tool("lookup").attributes["error.type"], "refused");
    assert_eq!(tool("no_such_tool").status, "error");
    assert_eq!(
        tool("no_such_tool").attributes["error.type"],
        "unknown_tool"
    );

    let chats: Vec<&SpanLine> = spans.iter().filter(|s| s.name == "chat").collect();
    assert_eq!(chats.len(), 3, "{chats:#?}");
    let failed: Vec<&&SpanLine> = chats.iter().filter(|s| s.status == "error").collect();
    assert_eq!(failed.len(), 1, "{chats:#?}");
    assert_eq!(failed[0].attributes["error.type"], "rate_limited");
    assert!(
        chats
            .iter()
            .filter(|s| s.status == "ok")
            .all(|s| !s.attributes.contains_key("error.type"))
    );

    let text = troupe_cli::trace_tree::render_file(&path).unwrap();
    assert!(text.contains("ERROR (refused)"), "{text}");
    assert!(text.contains("ERROR (unknown_tool)"), "{text}");
    assert!(text.contains("ERROR (rate_limited)"), "{text}");
}

/// `TROUPE_TRACE_CONTENT`: with content on, `chat` spans carry the prompt and the answer in the
/// GenAI conventions' shape and `execute_tool` spans the arguments and the result; with it off,
/// none of it is in the file.
#[test]
fn content_recording_puts_prompts_and_tool_io_in_the_trace_file_only_when_on() {
    let dir = tempfile::tempdir().unwrap();
    for record_content in [true, false] {
        let path = dir
            .path()
            .join(format!("team-content-{record_content}.jsonl"));
        with_trace_file(&path, record_content, || block_on(run_scripted_team()));
        let text = std::fs::read_to_string(&path).unwrap();
        let spans = spans(&path);
        if !record_content {
            for absent in ["Name and slogan, please.", "A bakery name?", "Crumb & Co."] {
                assert!(
                    !text.contains(absent),
                    "`{absent}` recorded with content off"
                );
            }
            for span in &spans {
                assert!(
                    span.attributes
                        .keys()
                        .all(|k| !troupe::telemetry::is_content_name(k)),
                    "{span:?}"
                );
            }
            continue;
        }
        let coordinator_chat = spans
            .iter()
            .find(|s| {
                s.name == "chat"
                    && s.attributes["gen_ai.agent.name"] == "coordinator"
                    && s.attributes.contains_key("gen_ai.output.messages")
                    && s.attributes["gen_ai.output.messages"]
                        .as_str()
                        .unwrap()
                        .contains("tool_call")
            })
            .unwrap_or_else(|| panic!("no coordinator chat span with content: {spans:#?}"));
        let input: serde_json::Value = serde_json::from_str(
            coordinator_chat.attributes["gen_ai.input.messages"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            input,
            serde_json::json!([{
                "role": "user",
                "parts": [{"type": "text", "content": "Name and slogan, please."}]
            }])
        );
        let output: serde_json::Value = serde_json::from_str(
            coordinator_chat.attributes["gen_ai.output.messages"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        let first_call = &output[0]["parts"][0];
        assert_eq!(output[0]["role"], "assistant");
        assert_eq!(first_call["type"], "tool_call");
        assert_eq!(first_call["name"], "ask_agent");
        assert_eq!(first_call["arguments"]["message"], "A bakery name?");

        let tool = spans
            .iter()
            .find(|s| {
                s.name == "execute_tool"
                    && s.attributes["gen_ai.tool.call.arguments"]
                        .as_str()
                        .is_some_and(|a| a.contains("A bakery name?"))
            })
            .unwrap_or_else(|| panic!("no execute_tool span with arguments: {spans:#?}"));
        assert_eq!(tool.attributes["gen_ai.tool.call.result"], "Crumb & Co.");
    }
}

/// Content is redacted like every other field: a key pasted into a prompt stays out.
#[test]
fn recorded_content_is_redacted() {
    use std::sync::Arc;

    use troupe::models::{ScriptedModel, ScriptedReply};
    use troupe::{AgentSpec, Team, TeamConfig, spawn_agent};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redacted-content.jsonl");
    with_trace_file(&path, true, || {
        block_on(async {
            let model = ScriptedModel::new("scripted-echo", [ScriptedReply::text("Noted.")]);
            let team = Team::start(TeamConfig::default()).await.unwrap();
            spawn_agent(&team, AgentSpec::new("a", Arc::new(model)))
                .await
                .unwrap();
            team.ask(
                "a",
                "my key is sk-proj-PASTEDsecret123 and password=PASTEDpw99",
            )
            .await
            .unwrap();
            team.shutdown().await;
        })
    });
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("gen_ai.input.messages"), "{text}");
    assert!(text.contains("my key is"), "{text}");
    assert!(!text.contains("PASTED"), "{text}");
}
