//! The compressor's calls ride the prompt cache: a summary written by the agent's own model is
//! the agent's last request plus one instruction at the end, and the four-tool loop's requests
//! each extend the one before.

use std::sync::Arc;
use std::time::Duration;

use troupe_agents::compression::{
    COMPRESSION_AGENT, CompactionRequest, CompressionConfig, CompressorJob, CompressorModel,
    InProcess,
};
use troupe_agents::{
    AgentSpec, CompactionSettings, LlmAgent, shared_counter, spawn_agent, spawn_compression_agent,
};
use troupe_compaction::ContextPolicy;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::CompactTrigger;
use troupe_protocol::FileLedger;
use troupe_protocol::{
    ChatMessage, ChatRequest, Conversation, Role, ToolCall, ToolChoice, TraceContext,
};
use troupe_runtime::{Team, TeamConfig};

/// A summary grounded in the parts the agent was given (the trust checks must accept it).
const SUMMARY: &str = "## Goal\nKeep in mind the text of each part the agent was given.\n\
## Constraints & Preferences\n- keep the text in mind\n## Progress\n### Done\n- part 0 and \
part 1 noted, line by line\n### In Progress\n- part 2 text\n### Blocked\n- (none)\n\
## Key Decisions\n- the agent noted each part\n## Next Steps\n1. keep the parts in mind\n\
## Critical Context\n- line 0: some text the agent was given to keep in mind";

fn part(i: usize) -> String {
    let lines: String = (0..60)
        .map(|n| format!("line {n}: some text the agent was given to keep in mind\n"))
        .collect();
    format!("part {i}:\n{lines}")
}

/// The summary call: the one request whose instruction asks for the hand-off note.
fn is_summary_call(request: &ChatRequest) -> bool {
    request.tool_choice == ToolChoice::None
        && request.messages.last().is_some_and(|m| {
            m.role == Role::User && m.text().starts_with("Stop working on the task")
        })
}

#[tokio::test]
async fn the_summary_call_is_the_agents_last_request_plus_an_instruction() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    // The default: the compression agent summarizes with the asking agent's own model.
    let config = CompressionConfig::new(shared_counter());
    assert!(matches!(config.model, CompressorModel::AgentsOwn));
    spawn_compression_agent(&team, config).await.unwrap();
    let model = Arc::new(ScriptedModel::new("coder", []).with_fallback("noted."));
    let settings = CompactionSettings {
        policy: Some(ContextPolicy {
            tool_output_limit_tokens: 100_000,
            ..ContextPolicy::for_window(10_000)
        }),
        // The agent sends a tool with every call (the `compact` tool): the summary call must too.
        agent_tool: true,
        ..CompactionSettings::default()
    };
    let spec = AgentSpec::new("coder", model.clone())
        .instructions("You are a careful note taker.")
        .compaction(settings);
    spawn_agent(&team, spec).await.unwrap();
    for i in 0..4 {
        team.ask("coder", part(i)).await.unwrap();
    }
    let agent_last = model.requests().last().cloned().unwrap();
    // The four-tool loop's first step ends it (no tool call); then the planner summarizes.
    model.push([
        ScriptedReply::text("nothing to do"),
        ScriptedReply::text(SUMMARY),
    ]);
    let applied = team.agent::<LlmAgent>("coder").compact(None).await.unwrap();
    assert!(applied.report.fallbacks.is_empty(), "{:?}", applied.report);
    assert!(applied.summary.is_some(), "{:?}", applied.report);
    // The report counts the call as inline, and the receipt prices it at the cached rate (#31).
    let usage = applied.report.summarizer;
    assert_eq!(usage.inline_calls, 1, "{:?}", applied.report);
    let receipt = applied
        .report
        .receipt
        .expect("a changed conversation is priced");
    assert!(
        receipt.summarizer_billed < usage.input_tokens as f64 * 0.5,
        "{receipt:?}"
    );

    let summary_calls: Vec<ChatRequest> = model
        .requests()
        .into_iter()
        .filter(is_summary_call)
        .collect();
    assert_eq!(summary_calls.len(), 1, "one summary call");
    let call = &summary_calls[0];
    let agent_messages = call.messages.len() - 1;
    // Byte for byte the request the agent sent last (its system prompt first), then the
    // instruction: a caching provider reads everything but the instruction from its cache.
    assert_eq!(call.messages[..agent_messages], agent_last.messages[..]);
    assert_eq!(call.messages[0].role, Role::System);
    assert_eq!(call.tools, agent_last.tools);
    assert!(!call.tools.is_empty());
    let instruction = call.messages[agent_messages].text();
    assert!(instruction.contains("## Critical Context"), "{instruction}");
    assert!(
        instruction.contains("stay as they are: leave them out of the note")
            || instruction.contains("stays as it is: leave it out of the note"),
        "the messages after the segment are named as kept: {instruction}"
    );
    assert!(instruction.ends_with("Write the note now."));
    team.shutdown().await;
}

fn reads(n: usize) -> Conversation {
    let mut messages = vec![
        ChatMessage::system("You are a coder."),
        ChatMessage::user("Read the files."),
    ];
    for i in 0..n {
        let call = ToolCall::new(
            format!("c{i}"),
            "read_file",
            format!(r#"{{"path": "src/f{i}.rs"}}"#),
        );
        messages.push(ChatMessage::assistant_tool_calls(None, vec![call]));
        let body: String = (0..40)
            .map(|l| format!("line {l}: some file content with several words in it\n"))
            .collect();
        messages.push(ChatMessage::tool_result(format!("c{i}"), body));
    }
    messages.push(ChatMessage::user("question?"));
    messages.push(ChatMessage::assistant("answer."));
    Conversation::from_messages(messages)
}

#[tokio::test]
async fn each_request_of_the_four_tool_loop_extends_the_one_before() {
    // One mask per step: six steps before the target, more than the loop ever kept before.
    let masks = (0..6).map(|i| {
        ScriptedReply::call(
            "compress_tool_result",
            format!(r#"{{"message_id": "m{}", "strategy": "mask"}}"#, 4 + 2 * i),
        )
    });
    let model = Arc::new(ScriptedModel::new("compactor", masks));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(model.clone());
    spawn_compression_agent(&team, config).await.unwrap();
    let request = CompactionRequest {
        agent: "coder".into(),
        conversation: reads(12),
        ledger: FileLedger::new(),
        policy: ContextPolicy {
            tool_output_limit_tokens: 100_000,
            ..ContextPolicy::for_window(8_000)
        },
        trigger: CompactTrigger::Manual,
        focus: None,
        lead: Default::default(),
        tokens: None,
        in_process: InProcess::default(),
    };
    let compaction = team
        .directory()
        .ask_job(
            COMPRESSION_AGENT,
            |reply| CompressorJob::Compact(Box::new(request), reply),
            TraceContext::new_root(),
            Duration::from_secs(60),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(compaction.report.reached, "{:?}", compaction.report);
    let requests = model.requests();
    assert_eq!(requests.len(), 6, "six loop steps");
    for pair in requests.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert!(
            after.messages.len() > before.messages.len()
                && after.messages[..before.messages.len()] == before.messages[..],
            "a later request rewrote an earlier one's messages"
        );
        assert_eq!(after.tools, before.tools);
        assert_eq!(after.tool_choice, before.tool_choice);
    }
    team.shutdown().await;
}
