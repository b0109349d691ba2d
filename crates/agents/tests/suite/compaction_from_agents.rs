//! Every way an agent starts a compaction: the automatic trigger (a warning first), `/compact`
//! (refused while responding, or joining the running compaction), a closed scope, a context
//! length error (compact and retry once), and the agent's own `compact` tool (a model error
//! after it rolls the conversation back).

use std::sync::Arc;
use std::time::Duration;

use troupe_agents::compression::CompressionConfig;
use troupe_agents::{
    AgentSpec, CompactionAskError, CompactionSettings, LlmAgent, ScopeError, WorkAhead,
    shared_counter, spawn_agent, spawn_compression_agent,
};
use troupe_compaction::ContextPolicy;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::CompactTrigger;
use troupe_protocol::{ChatModel, Event};
use troupe_runtime::{Team, TeamConfig};

use super::support::compression::{SUMMARY, big, policy, team_with_compressor};

fn reader_tools() -> troupe_tools::ToolRegistry {
    let mut tools = troupe_tools::ToolRegistry::new();
    tools
        .register_fn(
            "read_big",
            "Read a big file.",
            |_: troupe_tools::NoArgs| async move { Ok::<_, troupe_tools::ToolError>(big(40)) },
        )
        .unwrap();
    tools
}

fn small_window_settings() -> CompactionSettings {
    CompactionSettings {
        policy: Some(policy()),
        ..CompactionSettings::default()
    }
}

#[tokio::test]
async fn the_automatic_trigger_warns_then_compacts() {
    let script = (0..8)
        .map(|_| ScriptedReply::call("read_big", "{}"))
        .chain([ScriptedReply::text("done")]);
    let model = Arc::new(ScriptedModel::new("coder", script).with_fallback(SUMMARY));
    let team = team_with_compressor(None).await;
    let mut events = team.subscribe();
    // The blocking timeline: no compaction runs ahead of the trigger.
    let settings = CompactionSettings {
        work_ahead: WorkAhead::Off,
        ..small_window_settings()
    };
    let spec = AgentSpec::new("coder", model)
        .tools(reader_tools())
        .compaction(settings)
        .max_turns(12);
    spawn_agent(&team, spec).await.unwrap();
    assert_eq!(team.ask("coder", "read everything").await.unwrap(), "done");
    let mut saw = Vec::new();
    while let Ok(record) = events.try_recv() {
        match record.event {
            Event::ContextWarning { .. } => saw.push("warning"),
            Event::CompactionStarted { trigger, .. } => {
                assert_eq!(trigger, CompactTrigger::Automatic);
                saw.push("started")
            }
            Event::CompactionFinished { .. } => saw.push("finished"),
            _ => {}
        }
    }
    let first_warning = saw
        .iter()
        .position(|s| *s == "warning")
        .expect("a context warning");
    let first_start = saw
        .iter()
        .position(|s| *s == "started")
        .expect("an automatic compaction");
    assert!(first_warning < first_start, "{saw:?}");
    assert!(saw.contains(&"finished"), "{saw:?}");
    // The conversation stayed within budget and valid.
    let conversation = team.checkpoint("coder").unwrap().conversation;
    let tokens = troupe_tokens::TokenCache::new()
        .count_messages(shared_counter().as_ref(), conversation.messages())
        .total;
    assert!(
        tokens < policy().trigger_tokens(),
        "{tokens} tokens after the run"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn manual_compact_refusals_and_summary() {
    let team = team_with_compressor(None).await;
    let model = Arc::new(ScriptedModel::new("m", []).with_fallback("ok"));
    spawn_agent(
        &team,
        AgentSpec::new("a", model).compaction(small_window_settings()),
    )
    .await
    .unwrap();
    // Fewer than two messages.
    assert_eq!(
        team.agent::<LlmAgent>("a").compact(None).await.unwrap_err(),
        CompactionAskError::NothingToCompact
    );
    assert_eq!(
        CompactionAskError::NothingToCompact.to_string(),
        "nothing to compact"
    );
    team.ask("a", "hello").await.unwrap();
    // Under target: no compaction needed.
    let outcome = team
        .agent::<LlmAgent>("a")
        .compact(Some("keep names".into()))
        .await
        .unwrap();
    assert!(outcome.report.no_compaction_needed, "{:?}", outcome.report);
    team.shutdown().await;
}

#[tokio::test]
async fn manual_compact_is_refused_while_responding() {
    let team = team_with_compressor(None).await;
    let model = Arc::new(SlowModel {
        inner: ScriptedModel::new("m", []).with_fallback("ok"),
        delay: Duration::from_millis(400),
    });
    spawn_agent(&team, AgentSpec::new("a", model))
        .await
        .unwrap();
    let background = {
        let dir = team.directory().clone();
        tokio::spawn(async move {
            dir.ask(
                "a",
                troupe_runtime::AgentRequest::from_user("hi"),
                Duration::from_secs(5),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let err = team.agent::<LlmAgent>("a").compact(None).await.unwrap_err();
    assert_eq!(err.to_string(), "cannot compact while responding");
    background.await.unwrap().unwrap();
    team.shutdown().await;
}

/// A model that answers after a delay (to make races observable).
struct SlowModel {
    inner: ScriptedModel,
    delay: Duration,
}

#[async_trait::async_trait]
impl ChatModel for SlowModel {
    fn info(&self) -> troupe_protocol::ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(
        &self,
        request: troupe_protocol::ChatRequest,
    ) -> Result<troupe_protocol::ChatStream, troupe_protocol::ModelError> {
        tokio::time::sleep(self.delay).await;
        self.inner.chat_stream(request).await
    }
}

/// The policy of the agent whose automatic compaction a manual request joins.
fn joining_policy() -> ContextPolicy {
    ContextPolicy {
        trigger: 0.5,
        warning: 0.45,
        target: 0.3,
        ..policy()
    }
}

/// Its target, in tokens, as the agent keeps it (of the window less the output reserve).
fn settings_target() -> usize {
    let policy = joining_policy();
    CompactionSettings {
        policy: Some(policy.clone()),
        ..CompactionSettings::default()
    }
    .policy_for(policy.context_window, None)
    .target_tokens()
}

#[tokio::test]
async fn a_manual_request_during_an_automatic_compaction_joins_it() {
    // The compaction model is slow, so the automatic compaction is still running when the
    // manual request arrives.
    let compactor: Arc<dyn ChatModel> = Arc::new(SlowModel {
        inner: ScriptedModel::new("slow-compactor", []).with_fallback(SUMMARY),
        delay: Duration::from_millis(300),
    });
    let team = team_with_compressor(Some(compactor)).await;
    let mut events = team.subscribe();
    let script = (0..6)
        .map(|_| ScriptedReply::call("read_big", "{}"))
        .chain([ScriptedReply::text("done")]);
    let model = Arc::new(ScriptedModel::new("coder", script));
    // The blocking road: the automatic compaction at the trigger runs while the request
    // waits (a job worked ahead, or room made at the limit without a model, would not be the
    // compaction a manual request joins).
    let settings = CompactionSettings {
        policy: Some(joining_policy()),
        work_ahead: WorkAhead::Off,
        ..CompactionSettings::default()
    };
    spawn_agent(
        &team,
        AgentSpec::new("coder", model)
            .tools(reader_tools())
            .compaction(settings)
            .max_turns(10),
    )
    .await
    .unwrap();
    let dir = team.directory().clone();
    let run = tokio::spawn(async move {
        dir.ask(
            "coder",
            troupe_runtime::AgentRequest::from_user("read"),
            Duration::from_secs(60),
        )
        .await
    });
    // Wait until an automatic compaction with something to do has started (one below the
    // target is announced too, and answers "no compaction needed" at once), then ask for a
    // manual one.
    let target = settings_target();
    loop {
        let record = events.recv().await.unwrap();
        if matches!(record.event, Event::CompactionStarted { tokens, .. } if tokens > target) {
            break;
        }
    }
    let joined = team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    // The first compaction to finish after the manual request is the automatic one it joined.
    let first_report = loop {
        let record = events.recv().await.unwrap();
        match record.event {
            Event::CompactionFinished { report, .. } => break report,
            Event::CompactionStarted { trigger, .. } => {
                panic!("a second compaction ({trigger}) started")
            }
            _ => {}
        }
    };
    run.await.unwrap().unwrap();
    assert_eq!(joined.report, *first_report);
    while let Ok(record) = events.try_recv() {
        if let Event::CompactionStarted { trigger, .. } = record.event {
            assert_ne!(
                trigger,
                CompactTrigger::Manual,
                "the manual request must not start its own compaction"
            );
        }
    }
    team.shutdown().await;
}

#[tokio::test]
async fn scoped_compression_resolves_its_model() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let agent_model = Arc::new(ScriptedModel::new("m", []).with_fallback("worked on it"));
    spawn_agent(&team, AgentSpec::new("a", agent_model))
        .await
        .unwrap();
    team.ask("a", "before the scope").await.unwrap();

    // No model given and none used before: error.
    team.agent::<LlmAgent>("a")
        .open_scope("loop")
        .await
        .unwrap();
    team.ask("a", "inside the scope").await.unwrap();
    let err = team
        .agent::<LlmAgent>("a")
        .close_scope(None, None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "compress requires a model but none declared"
    );

    // Scope summaries are the compression agent's work: without one, the scope stays open and
    // nothing is lost.
    let summarizer: Arc<dyn ChatModel> =
        Arc::new(ScriptedModel::new("s", []).with_fallback("scope summary"));
    team.agent::<LlmAgent>("a")
        .open_scope("loop")
        .await
        .unwrap();
    team.ask("a", "inside again").await.unwrap();
    let before = team.checkpoint("a").unwrap().conversation;
    let err = team
        .agent::<LlmAgent>("a")
        .close_scope(None, Some(summarizer.clone()))
        .await
        .unwrap_err();
    assert!(matches!(err, ScopeError::NoCompressionAgent), "{err}");
    assert_eq!(team.checkpoint("a").unwrap().conversation, before);

    // Explicit model, through the compression agent.
    spawn_compression_agent(&team, CompressionConfig::new(shared_counter()))
        .await
        .unwrap();
    let summary = team
        .agent::<LlmAgent>("a")
        .close_scope(Some("keep results".into()), Some(summarizer))
        .await
        .unwrap();
    assert_eq!(summary.as_deref(), Some("scope summary"));
    let conversation = team.checkpoint("a").unwrap().conversation;
    let last = conversation.last().unwrap().text();
    assert!(
        last.starts_with("<scope label=\"loop\">") && last.ends_with("</scope>"),
        "{last}"
    );
    assert!(
        conversation
            .messages()
            .iter()
            .any(|m| m.text() == "before the scope"),
        "older messages kept"
    );

    // Last used model, and an empty scope is skipped.
    team.agent::<LlmAgent>("a")
        .open_scope("empty")
        .await
        .unwrap();
    assert_eq!(
        team.agent::<LlmAgent>("a")
            .close_scope(None, None)
            .await
            .unwrap(),
        None
    );
    team.agent::<LlmAgent>("a")
        .open_scope("again")
        .await
        .unwrap();
    team.ask("a", "third").await.unwrap();
    assert_eq!(
        team.agent::<LlmAgent>("a")
            .close_scope(None, None)
            .await
            .unwrap()
            .as_deref(),
        Some("scope summary")
    );
    team.shutdown().await;
}

#[tokio::test]
async fn a_context_length_error_compacts_and_retries_once() {
    let script = (0..6)
        .map(|_| ScriptedReply::call("read_big", "{}"))
        .chain([
            ScriptedReply::text("read them all"),
            ScriptedReply::Error(troupe_protocol::ModelError::ContextLengthExceeded(
                "this model's maximum context length is 4000 tokens".into(),
            )),
            ScriptedReply::text("recovered"),
        ]);
    let model = Arc::new(ScriptedModel::new("coder", script));
    let team = team_with_compressor(None).await;
    let mut events = team.subscribe();
    let settings = CompactionSettings {
        auto: false,
        // No room kept for the answer: the conversation fits the window by the agent's count,
        // so the call is made and it is the provider that refuses it (as when its tokenizer
        // counts more than ours).
        output_reserve: Some(0),
        ..small_window_settings()
    };
    let spec = AgentSpec::new("coder", model.clone())
        .tools(reader_tools())
        .compaction(settings)
        .max_turns(10);
    spawn_agent(&team, spec).await.unwrap();
    team.ask("coder", "read everything").await.unwrap();
    let before = team.checkpoint("coder").unwrap().conversation.len();

    assert_eq!(team.ask("coder", "and now?").await.unwrap(), "recovered");
    let mut finished = 0;
    while let Ok(record) = events.try_recv() {
        if matches!(record.event, Event::CompactionFinished { .. }) {
            finished += 1;
        }
    }
    assert_eq!(finished, 1, "one emergency compaction");
    // The retried request carried the compacted conversation.
    let requests = model.requests();
    let failed = &requests[requests.len() - 2];
    let retried = &requests[requests.len() - 1];
    let size =
        |r: &troupe_protocol::ChatRequest| r.messages.iter().map(|m| m.text().len()).sum::<usize>();
    assert!(
        size(retried) < size(failed) / 2,
        "{} vs {} bytes",
        size(retried),
        size(failed)
    );
    assert!(team.checkpoint("coder").unwrap().conversation.len() <= before + 2);
    team.shutdown().await;
}

#[tokio::test]
async fn a_context_length_error_without_a_compressor_is_a_clear_error() {
    let model = Arc::new(ScriptedModel::new(
        "coder",
        [ScriptedReply::Error(
            troupe_protocol::ModelError::ContextLengthExceeded("too long".into()),
        )],
    ));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(&team, AgentSpec::new("coder", model))
        .await
        .unwrap();
    let err = team.ask("coder", "hi").await.unwrap_err();
    // Still the provider's context overflow, to match on; its text says why compacting failed.
    let troupe_runtime::AskError::Agent {
        error:
            troupe_runtime::AgentError::Model(troupe_protocol::ModelError::ContextLengthExceeded(why)),
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(
        why.contains("too long") && why.contains("no compression agent"),
        "{why}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn the_agent_compact_tool_appends_its_result_first_and_returns_the_outcome() {
    let script = (0..6)
        .map(|_| ScriptedReply::call("read_big", "{}"))
        .chain([
            ScriptedReply::call("compact", r#"{"focus": "file names"}"#),
            ScriptedReply::text("compacted"),
            ScriptedReply::call("compact", "{}"),
            ScriptedReply::text("again"),
        ]);
    let model = Arc::new(ScriptedModel::new("coder", script));
    let team = team_with_compressor(None).await;
    let settings = CompactionSettings {
        auto: false,
        agent_tool: true,
        // No room kept for the answer: the six reads fit the window, so nothing but the
        // agent's own `compact` call compacts.
        output_reserve: Some(0),
        ..small_window_settings()
    };
    let spec = AgentSpec::new("coder", model.clone())
        .tools(reader_tools())
        .compaction(settings)
        .max_turns(10);
    spawn_agent(&team, spec).await.unwrap();
    assert_eq!(
        team.ask("coder", "read, then compact").await.unwrap(),
        "compacted"
    );
    assert!(
        model.requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "compact")
    );

    let conversation = team.checkpoint("coder").unwrap().conversation;
    // The compact call and its result stayed paired; the result reports the compaction.
    let call_at = conversation
        .messages()
        .iter()
        .position(|m| m.calls().iter().any(|c| c.function.name == "compact"))
        .expect("the compact call is kept");
    let result = &conversation.messages()[call_at + 1];
    assert_eq!(
        result.tool_call_id.as_deref(),
        Some(conversation.messages()[call_at].calls()[0].id.as_str())
    );
    assert!(
        !result.text().contains("compacting the conversation"),
        "{}",
        result.text()
    );
    assert!(
        result.text().contains("## Goal") || result.text().contains("target"),
        "{}",
        result.text()
    );

    // Under target now: the tool says so.
    assert_eq!(team.ask("coder", "compact again").await.unwrap(), "again");
    let conversation = team.checkpoint("coder").unwrap().conversation;
    let last_result = conversation
        .messages()
        .iter()
        .rev()
        .find(|m| m.role == troupe_protocol::Role::Tool)
        .unwrap();
    assert_eq!(last_result.text(), "no compaction needed");
    team.shutdown().await;
}

#[tokio::test]
async fn a_model_error_after_the_compact_tool_rewrote_history_rolls_the_conversation_back() {
    let script = (0..6)
        .map(|_| ScriptedReply::call("read_big", "{}"))
        .chain([
            ScriptedReply::text("read them"),
            ScriptedReply::call("compact", "{}"),
            ScriptedReply::Error(troupe_protocol::ModelError::Unavailable("down".into())),
        ]);
    let model = Arc::new(ScriptedModel::new("coder", script));
    let team = team_with_compressor(None).await;
    let settings = CompactionSettings {
        auto: false,
        agent_tool: true,
        // No room kept for the answer: the six reads fit the window, so nothing but the
        // agent's own `compact` call compacts.
        output_reserve: Some(0),
        ..small_window_settings()
    };
    let spec = AgentSpec::new("coder", model.clone())
        .tools(reader_tools())
        .compaction(settings)
        .max_turns(10);
    spawn_agent(&team, spec).await.unwrap();
    assert_eq!(team.ask("coder", "read").await.unwrap(), "read them");
    let before = team.checkpoint("coder").unwrap().conversation;

    // The compaction rewrote the history mid-request; the model then failed.
    let err = team.ask("coder", "compact, then answer").await.unwrap_err();
    assert!(err.to_string().contains("down"), "{err}");
    let after = team.checkpoint("coder").unwrap().conversation;
    assert_eq!(after, before);
    let live = team
        .with_agent("coder", |a: &mut troupe_agents::LlmAgent| {
            a.conversation().clone()
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(live, before);
    team.shutdown().await;
}
