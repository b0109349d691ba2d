//! The JSONL trace file: what a real team run writes, and what it must never write.

use std::collections::HashMap;

use troupe::telemetry::jsonl::{SpanLine, TraceLine};
use troupe::trace_tree::read_trace_file;

use super::support::{run_scripted_team, with_trace_file};

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn spans(path: &std::path::Path) -> Vec<SpanLine> {
    read_trace_file(path)
        .unwrap()
        .lines
        .into_iter()
        .filter_map(|l| match l {
            TraceLine::Span(s) => Some(s),
            TraceLine::Event(_) => None,
        })
        .collect()
}

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

    use troupe::agents::model::{ScriptedModel, ScriptedReply};
    use troupe::runtime::ModelError;
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

    let text = troupe::trace_tree::render_file(&path).unwrap();
    assert!(text.contains("ERROR (refused)"), "{text}");
    assert!(text.contains("ERROR (unknown_tool)"), "{text}");
    assert!(text.contains("ERROR (rate_limited)"), "{text}");
}

/// One row per way a credential shows up in a provider error, a log line or a header dump: the
/// secret must go, the text around it must stay.
#[test]
fn redaction_removes_every_credential_format_and_keeps_the_text_around_it() {
    use troupe::telemetry::redact::redact_value;

    // (what, input, the secret, text that must survive)
    let rows: &[(&str, &str, &str, &str)] = &[
        (
            "Bearer",
            "status 401: Authorization: Bearer tok-Abc123XYZ was rejected",
            "tok-Abc123XYZ",
            "status 401",
        ),
        (
            "bare Bearer",
            "status 401: sent Bearer abcDEF123456ghi",
            "abcDEF123456ghi",
            "status 401",
        ),
        (
            "x-api-key header",
            "status 401\nx-api-key: Kx9f2Lmn88Qa\nretry later",
            "Kx9f2Lmn88Qa",
            "retry later",
        ),
        (
            "api-key header",
            "status 401 (api-key: 0123abcdSecretAzure)",
            "0123abcdSecretAzure",
            "status 401",
        ),
        (
            "query ?key=",
            "status 403 for https://example.com/v1/models?key=Qz7kD0cs9LmW&alt=json",
            "Qz7kD0cs9LmW",
            "&alt=json",
        ),
        (
            "access_token=",
            "status 401 GET /api?user=7&access_token=ya29.A0ARrdaM-secret&page=2",
            "ya29.A0ARrdaM-secret",
            "&page=2",
        ),
        (
            "JSON \"api_key\"",
            r#"status 400: {"error": "bad", "api_key": "my secret value 42", "input_tokens": 7}"#,
            "my secret value 42",
            r#""input_tokens": 7"#,
        ),
        (
            "escaped JSON \"api_key\"",
            r#"status 400: "{\"api_key\":\"plainSecret99\",\"model\":\"m\"}""#,
            "plainSecret99",
            r#"\"model\":\"m\""#,
        ),
        (
            "password=",
            "status 500: connect postgres://db?password=hunter2hunter2 failed",
            "hunter2hunter2",
            "failed",
        ),
        (
            "Cookie header",
            "status 401\nCookie: session=abcSESSION123; theme=dark\nstatus 401 again",
            "abcSESSION123",
            "status 401 again",
        ),
        (
            "JWT",
            "status 401: token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U expired",
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
            "expired",
        ),
        (
            "GitHub ghp_",
            "status 401: bad credentials ghp_16C7e42F292c6912E7710c838347Ae178B4a for repo",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "for repo",
        ),
        (
            "GitHub github_pat_",
            "status 401 github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCD rejected",
            "github_pat_11ABCDEFG0123456789",
            "rejected",
        ),
        (
            "AWS access key id",
            "status 403: The AWS Access Key Id AKIAIOSFODNN7EXAMPLE does not exist",
            "AKIAIOSFODNN7EXAMPLE",
            "does not exist",
        ),
        (
            "Stripe sk_live_",
            "status 401: Invalid API Key provided: sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "status 401: Invalid API Key provided",
        ),
        (
            "Slack xoxb-",
            "status 200 invalid_auth for xoxb-2048-1024-AbCdEfGhIjKlMnOp here",
            "xoxb-2048-1024-AbCdEfGhIjKlMnOp",
            "here",
        ),
        (
            "Hugging Face hf_",
            "status 401: Invalid token hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 for model",
            "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
            "for model",
        ),
        (
            "Google AIza",
            "status 400: API key not valid: AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW. Please pass a valid key.",
            "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
            "Please pass a valid key.",
        ),
        (
            "OpenAI sk-",
            "status 401: Incorrect API key provided: sk-proj-ABCdef123456. You can find your key",
            "sk-proj-ABCdef123456",
            "You can find your key",
        ),
        (
            "URL credentials",
            "status 407 via http://proxyuser:pr0xyPass@proxy.local:3128/",
            "pr0xyPass",
            "proxy.local:3128",
        ),
    ];
    for (what, input, secret, kept) in rows {
        let out = redact_value(input);
        assert!(
            !out.contains(secret),
            "{what}: `{secret}` survived in `{out}`"
        );
        assert!(out.contains(kept), "{what}: `{kept}` was lost in `{out}`");
        assert!(out.contains("[redacted]"), "{what}: no marker in `{out}`");
    }

    // Ordinary text is left alone.
    for text in [
        "gen_ai.usage.input_tokens=12 max_tokens=256 output_tokens: 7",
        "The key to good bread is time: let it rest overnight.",
        "Invalid API key: check the settings page",
        "read /home/baker/.config/troupe/keys/README.md and src/telemetry/redact.rs",
        "monkey=3 turkey: 4 keyboard=us tokenizer=cl100k_base",
        "ask the desk-clerk about the task-force and hf_hub_download",
        "status 401 Unauthorized",
    ] {
        assert_eq!(redact_value(text), text, "over-redacted");
    }
}

/// The API key of [`a_provider_error_carrying_the_key_reaches_neither_stderr_nor_the_trace`].
const E2E_KEY: &str = "sk-e2eSECRETkey0123456789";

/// An OpenAI-wire server on 127.0.0.1 that answers every request 401, echoing the key the way
/// careless providers and proxies do. Returns its `/v1` URL.
fn start_echoing_401_server() -> String {
    use std::io::{BufRead, BufReader, Read, Write};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let body = serde_json::json!({
                "error": {
                    "message": format!(
                        "Incorrect API key provided: {E2E_KEY}. Request had Authorization: Bearer {E2E_KEY}; see ?key={E2E_KEY}"
                    ),
                    "api_key": E2E_KEY,
                    "type": "invalid_request_error",
                    "code": "invalid_api_key"
                }
            })
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// End to end: `troupe chat` against a provider whose 401 echoes the key, with a trace file and
/// debug logs on. The key must not reach stdout (the REPL's error line), stderr (console logs and
/// the final error line) or the trace file.
#[test]
fn a_provider_error_carrying_the_key_reaches_neither_stderr_nor_the_trace() {
    use std::io::Write;
    use std::process::{Command, Stdio};

    let url = start_echoing_401_server();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            "[models.remote]\nprovider = \"openai\"\nbase_url = \"{url}\"\napi_key_env = \"TEST_LEAK_KEY\"\nmodel = \"m\"\ncontext_window = 8000\n\n[agents.assistant]\nmodel = \"remote\"\n"
        ),
    )
    .unwrap();
    let trace = dir.path().join("trace.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["chat", "--config"])
        .arg(&config)
        .arg("--session")
        .arg(dir.path().join("s.jsonl"))
        .env("TEST_LEAK_KEY", E2E_KEY)
        .env("TROUPE_TRACE", &trace)
        .env("TROUPE_TRACE_FILTER", "debug")
        .env("TROUPE_TRACE_CONTENT", "1")
        .env("RUST_LOG", "debug")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello\n/exit\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let file = std::fs::read_to_string(&trace).unwrap_or_default();

    // The request did fail with the provider's 401, and said so.
    assert!(
        stdout.contains("error: "),
        "no error line:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("Incorrect API key provided"),
        "the error lost its text:\n{stdout}"
    );
    assert!(!file.is_empty(), "no trace was written:\n{stderr}");
    for (what, text) in [
        ("stdout", stdout.as_ref()),
        ("stderr", stderr.as_ref()),
        ("the trace file", file.as_str()),
    ] {
        assert!(
            !text.contains("e2eSECRET"),
            "the key reached {what}:\n{text}"
        );
    }
    assert!(file.contains("[redacted]"), "{file}");
}

/// A command that fails outright: its final `error: …` line on stderr is redacted too.
#[test]
fn the_final_error_line_of_the_binary_is_redacted() {
    use std::process::Command;

    let dir = tempfile::tempdir().unwrap();
    let missing = dir
        .path()
        .join(format!("token=ghp_{}", "A".repeat(36)))
        .join("run.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("trace")
        .arg(&missing)
        .env_remove("TROUPE_TRACE")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("error: "), "{stderr}");
    assert!(!stderr.contains("AAAAAAAAAAAAAAAAAAAA"), "{stderr}");
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

    use troupe::agents::model::{ScriptedModel, ScriptedReply};
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

/// A live agent over its trigger: the automatic compaction is a span of the request that caused
/// it (same trace, beneath the agent's `invoke_agent`), and `/context` queries leave no trace.
#[test]
fn an_automatic_compaction_is_part_of_the_request_that_triggered_it() {
    use std::sync::Arc;
    use troupe::agents::model::{ScriptedModel, ScriptedReply};
    use troupe::agents::{
        AgentSpec, CompactionSettings, CompressionConfig, context_stats, shared_counter,
        spawn_agent, spawn_compression_agent,
    };
    use troupe::compaction::BudgetPolicy;
    use troupe::runtime::{Team, TeamConfig};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    with_trace_file(&path, false, || {
        block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let mut config = CompressionConfig::new(shared_counter());
            config.use_model = false;
            spawn_compression_agent(&team, config).await.unwrap();
            let mut tools = troupe::tools::ToolRegistry::new();
            tools
                .register_fn(
                    "read_big",
                    "Read a big file.",
                    |_: troupe::tools::NoArgs| async {
                        Ok::<_, troupe::tools::ToolError>(
                            (0..40)
                                .map(|i| format!("line {i}: file content with several words\n"))
                                .collect::<String>(),
                        )
                    },
                )
                .unwrap();
            let script = (0..8)
                .map(|_| ScriptedReply::call("read_big", "{}"))
                .chain([ScriptedReply::text("done")]);
            let spec = AgentSpec::new("coder", Arc::new(ScriptedModel::new("coder", script)))
                .tools(tools)
                .compaction(CompactionSettings {
                    policy: Some(BudgetPolicy {
                        tool_output_limit_tokens: 100_000,
                        ..BudgetPolicy::for_window(4_000)
                    }),
                    ..CompactionSettings::default()
                });
            spawn_agent(&team, spec).await.unwrap();
            team.ask("coder", "read the files").await.unwrap();
            context_stats(&team, "coder").await.unwrap();
            team.shutdown().await;
        })
    });

    let spans = spans(&path);
    let by_id: HashMap<&str, &SpanLine> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let traces: std::collections::BTreeSet<&str> =
        spans.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(traces.len(), 1, "one request, one trace: {traces:?}");
    let compactions: Vec<&SpanLine> = spans.iter().filter(|s| s.name == "compaction").collect();
    assert!(!compactions.is_empty(), "the trigger compacted");
    for compaction in compactions {
        let parent = by_id[compaction.parent_span_id.as_deref().unwrap()];
        assert_eq!(parent.name, "invoke_agent");
        assert_eq!(parent.attributes["gen_ai.agent.name"], "coder");
        assert_eq!(compaction.attributes["troupe.trigger"], "automatic");
        assert!(compaction.attributes["troupe.compaction.tokens_before"].is_u64());
        assert!(compaction.attributes["troupe.compaction.tiers"].is_string());
    }
    assert!(
        spans.iter().all(|s| s.name != "agent_job"),
        "jobs open no span of their own"
    );
}
