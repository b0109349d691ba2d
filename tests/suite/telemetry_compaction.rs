//! Compaction in the JSONL trace file: an automatic compaction, a background one and the
//! agent's own `compact` tool are spans of the request that caused them.

use std::collections::HashMap;

use troupe::protocol::trace::SpanLine;

use super::support::trace::{block_on, spans};
use super::support::with_trace_file;

/// A registry with one tool, `read_big`, that answers 40 lines: a few calls fill a small window.
fn read_big_tools() -> troupe::tools::ToolRegistry {
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
    tools
}

/// A live agent over its trigger: the automatic compaction is a span of the request that caused
/// it (same trace, beneath the agent's `invoke_agent`), and `/context` queries leave no trace.
#[test]
fn an_automatic_compaction_is_part_of_the_request_that_triggered_it() {
    use std::sync::Arc;
    use troupe::agents::compression::CompressionConfig;
    use troupe::agents::compression::CompressorModel;
    use troupe::agents::{
        AgentSpec, CompactionSettings, LlmAgent, WorkAhead, shared_counter, spawn_agent,
        spawn_compression_agent,
    };
    use troupe::compaction::ContextPolicy;
    use troupe::models::{ScriptedModel, ScriptedReply};
    use troupe::runtime::{Team, TeamConfig};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let stats = with_trace_file(&path, false, || {
        block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let mut config = CompressionConfig::new(shared_counter());
            config.model = CompressorModel::None;
            spawn_compression_agent(&team, config).await.unwrap();
            let tools = read_big_tools();
            let script = (0..8)
                .map(|_| ScriptedReply::call("read_big", "{}"))
                .chain([ScriptedReply::text("done")]);
            let spec = AgentSpec::new("coder", Arc::new(ScriptedModel::new("coder", script)))
                .tools(tools)
                .compaction(CompactionSettings {
                    policy: Some(ContextPolicy {
                        tool_output_limit_tokens: 100_000,
                        ..ContextPolicy::for_window(4_000)
                    }),
                    // The blocking road: the trigger compacts within the request, waiting.
                    work_ahead: WorkAhead::Off,
                    ..CompactionSettings::default()
                });
            spawn_agent(&team, spec).await.unwrap();
            team.ask("coder", "read the files").await.unwrap();
            let stats = team
                .agent::<LlmAgent>("coder")
                .context_stats()
                .await
                .unwrap();
            team.shutdown().await;
            stats
        })
    });

    let spans = spans(&path);
    let by_id: HashMap<&str, &SpanLine> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let traces: std::collections::BTreeSet<&str> =
        spans.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(traces.len(), 1, "one request, one trace: {traces:?}");
    let compactions: Vec<&SpanLine> = spans.iter().filter(|s| s.name == "compaction").collect();
    assert!(
        !compactions.is_empty(),
        "the trigger compacted: {stats:?} {:?}",
        spans.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()
    );
    for compaction in compactions {
        let parent = by_id[compaction.parent_span_id.as_deref().unwrap()];
        assert_eq!(parent.name, "invoke_agent");
        assert_eq!(parent.attributes["gen_ai.agent.name"], "coder");
        assert_eq!(compaction.attributes["troupe.trigger"], "automatic");
        assert!(compaction.attributes["troupe.compaction.tokens_before"].is_u64());
        assert!(compaction.attributes["troupe.compaction.tiers"].is_string());
        // The agent waited for it: the whole compaction.
        assert_eq!(compaction.attributes["troupe.compaction.mode"], "blocking");
        assert!(compaction.attributes["troupe.compaction.waited_ms"].is_u64());
    }
    assert!(
        spans.iter().all(|s| s.name != "agent_job"),
        "jobs open no span of their own"
    );
}

/// A compaction in the background is still part of the request whose turn started it (its
/// span beneath that request's `invoke_agent`, in its trace), says so, and records how long
/// the agent waited for it.
#[test]
fn a_background_compaction_is_a_span_of_the_request_that_started_it() {
    use std::sync::Arc;
    use troupe::agents::compression::{CompressionConfig, CompressorModel};
    use troupe::agents::{
        AgentSpec, CompactionSettings, WorkAhead, shared_counter, spawn_agent,
        spawn_compression_agent,
    };
    use troupe::compaction::ContextPolicy;
    use troupe::models::ScriptedModel;
    use troupe::protocol::{CompactionMode, Event};
    use troupe::runtime::{Team, TeamConfig};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    with_trace_file(&path, false, || {
        block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let mut config = CompressionConfig::new(shared_counter());
            config.model = CompressorModel::None;
            spawn_compression_agent(&team, config).await.unwrap();
            let model = Arc::new(ScriptedModel::new("coder", []).with_fallback("noted."));
            let spec = AgentSpec::new("coder", model).compaction(CompactionSettings {
                policy: Some(ContextPolicy {
                    tool_output_limit_tokens: 100_000,
                    ..ContextPolicy::for_window(8_000)
                }),
                work_ahead: WorkAhead::AtWarning,
                ..CompactionSettings::default()
            });
            spawn_agent(&team, spec).await.unwrap();
            let mut events = team.subscribe();
            let part = "line: some text the agent was given to keep in mind\n".repeat(4);
            let mut landed = false;
            for i in 0..80 {
                team.ask("coder", format!("part {i}:\n{part}"))
                    .await
                    .unwrap();
                while let Ok(record) = events.try_recv() {
                    landed |= matches!(
                        record.event,
                        Event::CompactionApplied {
                            mode: CompactionMode::Background,
                            applied: true,
                            ..
                        }
                    );
                }
                if landed {
                    break;
                }
            }
            assert!(landed, "no background compaction landed");
            team.shutdown().await;
        })
    });

    let spans = spans(&path);
    let by_id: HashMap<&str, &SpanLine> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let background: Vec<&SpanLine> = spans
        .iter()
        .filter(|s| {
            s.name == "compaction" && s.attributes["troupe.compaction.mode"] == "background"
        })
        .collect();
    assert!(!background.is_empty());
    for compaction in background {
        let parent = by_id[compaction.parent_span_id.as_deref().unwrap()];
        assert_eq!(parent.name, "invoke_agent");
        assert_eq!(parent.trace_id, compaction.trace_id);
        assert!(compaction.attributes["troupe.compaction.waited_ms"].is_u64());
    }
}

/// The agent's own `compact` tool runs like every tool: an `execute_tool` span (the compaction
/// beneath it) between `ToolCallStarted` and `ToolCallFinished`.
#[test]
fn the_agents_compact_tool_is_an_execute_tool_span_with_its_events() {
    use std::sync::Arc;
    use troupe::agents::compression::{CompressionConfig, CompressorModel};
    use troupe::agents::{AgentSpec, CompactionSettings, spawn_agent, spawn_compression_agent};
    use troupe::compaction::ContextPolicy;
    use troupe::models::{ScriptedModel, ScriptedReply};
    use troupe::protocol::Event;
    use troupe::runtime::{Team, TeamConfig};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let events = with_trace_file(&path, false, || {
        block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let config = CompressionConfig {
                model: CompressorModel::None,
                ..CompressionConfig::default()
            };
            spawn_compression_agent(&team, config).await.unwrap();
            let tools = read_big_tools();
            let script = (0..6)
                .map(|_| ScriptedReply::call("read_big", "{}"))
                .chain([
                    ScriptedReply::call("compact", "{}"),
                    ScriptedReply::text("compacted"),
                ]);
            let spec = AgentSpec::new("coder", Arc::new(ScriptedModel::new("coder", script)))
                .tools(tools)
                .max_turns(10)
                .compaction(CompactionSettings {
                    policy: Some(ContextPolicy {
                        tool_output_limit_tokens: 100_000,
                        ..ContextPolicy::for_window(4_000)
                    }),
                    auto: false,
                    agent_tool: true,
                    // Nothing but the agent's own `compact` call compacts.
                    output_reserve: Some(0),
                    ..CompactionSettings::default()
                });
            spawn_agent(&team, spec).await.unwrap();
            let mut events = team.subscribe();
            assert_eq!(
                team.ask("coder", "read, then compact").await.unwrap(),
                "compacted"
            );
            team.shutdown().await;
            let mut seen = Vec::new();
            loop {
                match events.try_recv() {
                    Ok(record) => seen.push(record.event),
                    // Deltas may have pushed the oldest events out; the rest still count.
                    Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => {}
                    Err(_) => break,
                }
            }
            seen
        })
    });

    let spans = spans(&path);
    let compact: Vec<&SpanLine> = spans
        .iter()
        .filter(|s| s.name == "execute_tool" && s.attributes["gen_ai.tool.name"] == "compact")
        .collect();
    assert_eq!(compact.len(), 1, "{spans:#?}");
    let compaction = spans
        .iter()
        .find(|s| s.name == "compaction")
        .expect("the compact call compacted");
    assert_eq!(
        compaction.parent_span_id.as_deref(),
        Some(compact[0].span_id.as_str()),
        "the compaction runs inside the tool's span"
    );
    assert!(
        compact[0]
            .attributes
            .get("error.type")
            .is_none_or(|e| e.is_null()),
        "{:?}",
        compact[0]
    );
    let started = events.iter().any(
        |e| matches!(e, Event::ToolCallStarted { tool, agent, .. } if tool == "compact" && agent == "coder"),
    );
    let finished = events.iter().any(|e| {
        matches!(e, Event::ToolCallFinished { tool, is_error, .. } if tool == "compact" && !is_error)
    });
    assert!(started && finished, "{events:#?}");
}

/// `long_session --scripted`, the example that shows compaction, traced through its binary:
/// every `compaction` span says how it ended (#52: a cancelled background compaction was an
/// `ok` span with no outcome, tokens or error) — the applied ones and a dropped answer with
/// their tokens, a cancelled or failed one as an error with its type and the tokens it started
/// from. Which way its background jobs end (dropped as stale, cancelled, or failed at the
/// shutdown) depends on how the run's tasks interleave; each says which.
#[test]
fn every_compaction_span_of_the_long_session_example_says_how_it_ended() {
    use super::support::binary::example;
    use serde_json::Value;

    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("run.jsonl");
    let out = std::process::Command::new(example("long_session"))
        .arg("--scripted")
        .env("TROUPE_TRACE", &trace)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let compactions: Vec<SpanLine> = spans(&trace)
        .into_iter()
        .filter(|s| s.name == "compaction")
        .collect();
    let mut outcomes = std::collections::BTreeSet::new();
    for span in &compactions {
        let attr = |key: &str| span.attributes.get(key).cloned().unwrap_or(Value::Null);
        let outcome = attr("troupe.compaction.outcome");
        let outcome = outcome
            .as_str()
            .unwrap_or_else(|| panic!("a compaction span without its outcome: {span:?}"));
        outcomes.insert(outcome.to_string());
        assert!(attr("troupe.compaction.tokens_before").is_u64(), "{span:?}");
        match outcome {
            "applied" | "dropped" => {
                assert_eq!(span.status, "ok", "{span:?}");
                assert!(attr("troupe.compaction.tokens_after").is_u64(), "{span:?}");
            }
            "cancelled" => {
                assert_eq!(span.status, "error", "{span:?}");
                assert_eq!(attr("error.type"), "cancelled", "{span:?}");
            }
            "failed" => {
                assert_eq!(span.status, "error", "{span:?}");
                assert!(attr("error.type").is_string(), "{span:?}");
            }
            other => panic!("outcome {other} in a scripted run: {span:?}"),
        }
        if outcome == "dropped" {
            assert!(attr("troupe.compaction.dropped").is_string(), "{span:?}");
        }
    }
    assert!(outcomes.contains("applied"), "{outcomes:?}");
    assert!(
        ["dropped", "cancelled", "failed"]
            .iter()
            .any(|o| outcomes.contains(*o)),
        "no background job ended unapplied: {outcomes:?}"
    );
}
