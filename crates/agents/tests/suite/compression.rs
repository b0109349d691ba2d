//! The compression agent's jobs: the model's four tools, nonsense refused, the mechanical
//! summarizer, a summarizer that answers a skeleton. How an agent starts a compaction is
//! `compaction_from_agents.rs`.

use std::sync::Arc;
use std::time::Duration;

use troupe_agents::compression::COMPRESSION_AGENT;
use troupe_agents::compression::{CompactionRequest, CompressorJob, InProcess};
use troupe_agents::shared_counter;
use troupe_compaction::invariants::validate;
use troupe_compaction::{Compaction, CompactionError};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::CompactTrigger;
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, ChatModel, Conversation, Event, ToolCall, TraceContext};
use troupe_runtime::Team;

use super::support::compression::{
    SUMMARY, big, policy, talkative_conversation, team_with_compressor,
};

/// system, task, six read calls with ~500-token results, then five short exchanges.
fn long_conversation() -> Conversation {
    let mut messages = vec![
        ChatMessage::system("You are a coder."),
        ChatMessage::user("Read the six files."),
    ];
    for i in 0..6 {
        let call = ToolCall::new(
            format!("c{i}"),
            "read_file",
            format!(r#"{{"path": "src/f{i}.rs"}}"#),
        );
        messages.push(ChatMessage::assistant_tool_calls(None, vec![call]));
        messages.push(ChatMessage::tool_result(format!("c{i}"), big(40)));
    }
    for i in 0..3 {
        messages.push(ChatMessage::user(format!("question {i}?")));
        messages.push(ChatMessage::assistant(format!("answer {i}.")));
    }
    Conversation::from_messages(messages)
}

async fn run_job(team: &Team, request: CompactionRequest) -> Result<Compaction, CompactionError> {
    team.directory()
        .ask_job(
            COMPRESSION_AGENT,
            |reply| CompressorJob::Compact(Box::new(request), reply),
            TraceContext::new_root(),
            Duration::from_secs(60),
        )
        .await
        .unwrap()
}

fn job(conversation: Conversation) -> CompactionRequest {
    CompactionRequest {
        agent: "coder".into(),
        conversation,
        ledger: FileLedger::new(),
        policy: policy(),
        trigger: CompactTrigger::Manual,
        focus: None,
        lead: Default::default(),
        tokens: None,
        in_process: InProcess::default(),
    }
}

#[tokio::test]
async fn a_scripted_compaction_model_drives_the_four_tools_to_the_target() {
    let model = Arc::new(ScriptedModel::new(
        "compactor",
        [
            ScriptedReply::call("get_compression_metadata", "{}"),
            ScriptedReply::ToolCalls(vec![
                (
                    "compress_tool_result".into(),
                    r#"{"message_id": "m4", "strategy": "mask"}"#.into(),
                ),
                (
                    "compress_tool_result".into(),
                    r#"{"message_id": "m6", "strategy": "mask"}"#.into(),
                ),
            ]),
            ScriptedReply::call(
                "compress_conversation_segment",
                r#"{"start_id": "m7", "end_id": "m14", "focus": "file names"}"#,
            ),
            ScriptedReply::text(SUMMARY),
            ScriptedReply::call("verify_compression_target", "{}"),
        ],
    ));
    let team = team_with_compressor(Some(model.clone())).await;
    let mut events = team.subscribe();
    let original = long_conversation();
    let compaction = run_job(&team, job(original.clone())).await.unwrap();

    assert!(compaction.report.reached, "{:?}", compaction.report);
    assert!(compaction.report.tokens_after <= compaction.report.target_tokens);
    validate(
        &original.to_messages(),
        &compaction.messages,
        &compaction.archive,
        &policy(),
        shared_counter().as_ref(),
    )
    .unwrap();
    // The model's calls were executed in order: masks, then the segment summary.
    let texts: Vec<String> = compaction.messages.iter().map(|m| m.text()).collect();
    assert!(
        texts.iter().any(|t| t.contains("## Goal")),
        "the summary is in: {texts:?}"
    );
    // The loop verifies after every step itself: once the segment reached the target, the
    // model's own verify call was not needed.
    assert_eq!(model.remaining(), 1, "every step up to the target was used");
    let opening = &model.requests()[0].messages;
    assert_eq!(
        opening[2].calls()[0].function.name,
        "get_compression_metadata",
        "the loop opens with the metadata as a tool result"
    );
    assert!(
        opening[3].text().contains("tokens_to_free"),
        "{:?}",
        opening[3]
    );
    let mut progress = 0;
    while let Ok(record) = events.try_recv() {
        if matches!(record.event, Event::CompactionProgress { .. }) {
            progress += 1;
        }
    }
    assert!(
        progress >= 3,
        "one progress event per iteration, got {progress}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn nonsense_tool_calls_are_refused_and_the_planner_still_reaches_the_target() {
    let model = Arc::new(
        ScriptedModel::new(
            "confused",
            [
                ScriptedReply::ToolCalls(vec![
                    (
                        "compress_tool_result".into(),
                        r#"{"message_id": "m1", "strategy": "mask"}"#.into(),
                    ),
                    (
                        "compress_tool_result".into(),
                        r#"{"message_id": "banana", "strategy": "mask"}"#.into(),
                    ),
                    ("delete_everything".into(), "{}".into()),
                ]),
                ScriptedReply::call("compress_tool_result", "not json"),
                ScriptedReply::call(
                    "compress_conversation_segment",
                    r#"{"start_id": "m2", "end_id": "m20"}"#,
                ),
            ],
        )
        .with_fallback(SUMMARY),
    );
    let team = team_with_compressor(Some(model.clone())).await;
    let original = long_conversation();
    let compaction = run_job(&team, job(original.clone())).await.unwrap();
    assert!(compaction.report.reached, "{:?}", compaction.report);
    validate(
        &original.to_messages(),
        &compaction.messages,
        &compaction.archive,
        &policy(),
        shared_counter().as_ref(),
    )
    .unwrap();
    // Two steps that freed nothing, and the planner took over: a confused model does not
    // spend every iteration.
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "stopped after two idle steps");
    // The refusals told the model what was wrong.
    let refusals: Vec<String> = requests
        .iter()
        .flat_map(|r| {
            r.messages
                .iter()
                .filter(|m| m.role == troupe_protocol::Role::Tool)
                .map(|m| m.text())
        })
        .collect();
    assert!(
        refusals
            .iter()
            .any(|t| t.contains("refused") && t.contains("protected")),
        "{refusals:?}"
    );
    assert!(
        refusals.iter().any(|t| t.contains("banana")),
        "{refusals:?}"
    );
    assert!(
        refusals
            .iter()
            .any(|t| t.contains("unknown tool `delete_everything`")),
        "{refusals:?}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn without_a_model_the_mechanical_summarizer_still_reaches_the_target() {
    let team = team_with_compressor(None).await;
    let original = long_conversation();
    let compaction = run_job(&team, job(original.clone())).await.unwrap();
    assert!(compaction.report.reached, "{:?}", compaction.report);
    // Under target: nothing changes and the report says so.
    let small =
        Conversation::from_messages([ChatMessage::user("hi"), ChatMessage::assistant("hello")]);
    let unchanged = run_job(&team, job(small.clone())).await.unwrap();
    assert!(unchanged.report.no_compaction_needed);
    assert_eq!(unchanged.messages, small.to_messages());
    team.shutdown().await;
}

#[tokio::test]
async fn a_summarizer_model_that_answers_with_an_empty_skeleton_is_replaced_by_the_mechanical_one()
{
    let skeleton = "```\n## Goal\n- (not provided)\n## Progress\n### Done\n- (not provided)\n### In Progress\n- (none)\n### Blocked\n- (none)\n## Key Decisions\n- (not provided)\n## Next Steps\n- (not provided)\n## Critical Context\n- (not provided)";
    let weak: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("weak", []).with_fallback(skeleton));
    let team = team_with_compressor(Some(weak)).await;
    let compaction = run_job(&team, job(talkative_conversation())).await.unwrap();
    assert!(compaction.report.reached, "{:?}", compaction.report);
    let summary = compaction
        .messages
        .iter()
        .find(|m| m.kind == troupe_protocol::MessageKind::Summary)
        .expect("tier 3 wrote a summary")
        .text();
    // The mechanical summary quotes the user's requests; the skeleton never reached the history.
    assert!(summary.contains("User asked: \"step 0:"), "{summary}");
    assert!(!summary.contains("```"), "{summary}");
    // The report says the mechanical summary stood in, and why.
    assert!(
        compaction
            .report
            .fallbacks
            .iter()
            .any(|f| f.contains("`weak`") && f.contains("no content beyond the section headings")),
        "{:?}",
        compaction.report.fallbacks
    );
    team.shutdown().await;
}
