//! The compression agent's primitives: metadata, each refusal, the planner's order.

use troupe_compaction::session::{CompactionSession, PlannedStep, Refusal, ToolResultStrategy};
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{CompactOptions, ContextPolicy, expand};
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, Conversation, MessageId, MessageKind, Role, ToolCall};
use troupe_tokens::CharEstimateCounter;

use super::support::{FailingSummarizer, FixedSummarizer, block_on, lines};

/// m1 system · m2 task · m3 assistant(read a, read b) · m4 result a (big) · m5 result b (small) ·
/// m6 display-only · m7 user · m8 assistant(bash) · m9 bash result · m10 user · m11 assistant ·
/// m12 user · m13 assistant(read c) · m14 result c · m15 assistant
fn fixture() -> Conversation {
    Conversation::from_messages([
        ChatMessage::system("system prompt"),
        ChatMessage::user("the task"),
        ChatMessage::assistant_tool_calls(
            Some("reading".into()),
            vec![
                ToolCall::new("a", "read", r#"{"path":"src/a.rs"}"#),
                ToolCall::new("b", "read", r#"{"path":"src/b.rs"}"#),
            ],
        ),
        ChatMessage::tool_result("a", lines("a", 400)),
        ChatMessage::tool_result("b", "tiny"),
        ChatMessage::assistant("shown to the user only").with_kind(MessageKind::DisplayOnly),
        ChatMessage::user(format!("now run the tests {}", "please ".repeat(50))),
        ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new("c1", "bash", r#"{"command":"cargo test"}"#)],
        ),
        ChatMessage::tool_result("c1", lines("test", 100)),
        ChatMessage::user("ok"),
        ChatMessage::assistant("fine"),
        ChatMessage::user("read c"),
        ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new("c", "read", r#"{"path":"src/c.rs"}"#)],
        ),
        ChatMessage::tool_result("c", lines("c", 30)),
        ChatMessage::assistant("done"),
    ])
}

fn policy() -> ContextPolicy {
    ContextPolicy {
        tool_output_limit_tokens: 500,
        summary_max_tokens: 200,
        ..ContextPolicy::for_window(2_000)
    }
}

fn m(n: u64) -> MessageId {
    MessageId(n)
}

#[test]
fn every_bad_call_is_refused_with_nothing_changed() {
    let conversation = fixture();
    let ledger = ledger_from_transcript(conversation.messages());
    let policy = policy();
    let counter = CharEstimateCounter;
    let summarizer = FixedSummarizer::new(50_000);
    let mut session = CompactionSession::new(
        &conversation,
        &ledger,
        &policy,
        &counter,
        CompactOptions::default(),
    )
    .unwrap();
    let before = session.messages().to_vec();

    let refusals = vec![
        session
            .compress_tool_result(m(99), ToolResultStrategy::Mask)
            .unwrap_err(),
        session
            .compress_tool_result(m(1), ToolResultStrategy::Mask)
            .unwrap_err(),
        session
            .compress_tool_result(m(3), ToolResultStrategy::Mask)
            .unwrap_err(),
        session
            .compress_tool_result(m(5), ToolResultStrategy::Truncate)
            .unwrap_err(),
        session
            .compress_tool_result(m(5), ToolResultStrategy::Mask)
            .unwrap_err(),
        session.remove_display_only(m(7)).unwrap_err(),
        block_on(session.compress_segment(m(7), m(3), None, &summarizer)).unwrap_err(),
        block_on(session.compress_segment(m(2), m(5), None, &summarizer)).unwrap_err(),
        block_on(session.compress_segment(m(3), m(4), None, &summarizer)).unwrap_err(),
        block_on(session.compress_segment(m(4), m(7), None, &summarizer)).unwrap_err(),
        block_on(session.compress_segment(m(6), m(6), None, &summarizer)).unwrap_err(),
        block_on(session.compress_segment(m(3), m(9), None, &FailingSummarizer)).unwrap_err(),
    ];
    let expected = [
        "there is no message m99",
        "m1 is protected (the system prompt)",
        "m3 is a message from the assistant, not a tool result",
        "not above the truncation limit of 500; mask it instead",
        "compressing m5 would not save tokens",
        "m7 is not a display-only message",
        "segment start m7 comes after its end m3",
        "includes m2, which is protected (the first user message)",
        "splits assistant message m3 from its tool result m5",
        "splits assistant message m3 from its tool result m4",
        "segment m6..m6 has nothing to summarize",
        "summarizing m3..m9 failed: the summarizer failed: connection refused",
    ];
    for (refusal, expected) in refusals.iter().zip(expected) {
        assert!(
            refusal.to_string().contains(expected),
            "`{refusal}` lacks `{expected}`"
        );
    }
    assert_eq!(
        session.messages(),
        &before[..],
        "refusals changed the conversation"
    );

    // Masking works, and masking again is refused.
    session
        .compress_tool_result(m(4), ToolResultStrategy::Mask)
        .unwrap();
    let new_id = session.messages()[3].id;
    let again = session
        .compress_tool_result(new_id, ToolResultStrategy::Truncate)
        .unwrap_err();
    assert!(
        matches!(again, Refusal::AlreadyCompressed { .. }),
        "{again}"
    );
    // A segment reaching into the protected tail is refused.
    let into_tail = block_on(session.compress_segment(m(7), m(12), None, &summarizer)).unwrap_err();
    assert!(
        matches!(into_tail, Refusal::RangeIncludesProtected { .. }),
        "{into_tail}"
    );
}

#[test]
fn under_target_every_mutation_is_refused() {
    let conversation = fixture();
    let policy = ContextPolicy::for_window(1_000_000);
    let counter = CharEstimateCounter;
    let ledger = FileLedger::new();
    let mut session = CompactionSession::new(
        &conversation,
        &ledger,
        &policy,
        &counter,
        CompactOptions::default(),
    )
    .unwrap();
    let refusal = session
        .compress_tool_result(m(4), ToolResultStrategy::Mask)
        .unwrap_err();
    assert!(
        refusal.to_string().starts_with("no compaction needed"),
        "{refusal}"
    );
    let compaction = session.finish().unwrap();
    assert!(compaction.report.no_compaction_needed);
    assert_eq!(compaction.messages, conversation.to_messages());
}

#[test]
fn metadata_describes_the_working_conversation() {
    let conversation = fixture();
    let ledger = ledger_from_transcript(conversation.messages());
    let counter = CharEstimateCounter;
    let policy = policy();
    let session = CompactionSession::new(
        &conversation,
        &ledger,
        &policy,
        &counter,
        CompactOptions::default(),
    )
    .unwrap();
    let meta = session.metadata();
    assert_eq!(meta.messages.len(), 15);
    assert_eq!(meta.target_tokens, 800);
    assert!(!meta.reached);
    assert_eq!(meta.tokens_to_free, meta.total_tokens - 800);
    assert_eq!(meta.messages[3].tool_name.as_deref(), Some("read"));
    assert_eq!(meta.messages[2].calls, ["read", "read"]);
    assert!(
        meta.messages[0].protected && meta.messages[1].protected && !meta.messages[3].protected
    );
    // Protected: m1-m2, then the last five user/assistant messages m10, m11, m12, m13, m15.
    let ranges: Vec<_> = meta
        .protected_ranges
        .iter()
        .map(|r| (r.start.0, r.end.0))
        .collect();
    assert_eq!(ranges, [(1, 2), (10, 13), (15, 15)]);
    assert_eq!(
        meta.ledger.read_only_files,
        ["src/a.rs", "src/b.rs", "src/c.rs"]
    );
    assert!(meta.previous_summary.is_none());
    let json = serde_json::to_value(&meta).unwrap();
    assert_eq!(json["messages"][3]["role"], "tool");
}

#[test]
fn planner_goes_cheapest_first_and_reaches_the_target() {
    let conversation = fixture();
    let ledger = ledger_from_transcript(conversation.messages());
    let counter = CharEstimateCounter;
    let policy = policy();
    let summarizer = FixedSummarizer::new(50_000);
    let mut session = CompactionSession::new(
        &conversation,
        &ledger,
        &policy,
        &counter,
        CompactOptions::default(),
    )
    .unwrap();
    let mut steps = Vec::new();
    let mut refused = 0;
    while let Some(step) = session.plan_next_step() {
        assert!(!steps.contains(&step), "planner repeated {step:?}");
        steps.push(step.clone());
        if block_on(session.apply_step(&step, Some(&summarizer))).is_err() {
            refused += 1;
        }
    }
    // Masking the tiny result of m5 would not save tokens: refused once, never retried.
    assert_eq!(refused, 1);
    let kinds: Vec<&str> = steps
        .iter()
        .map(|s| match s {
            PlannedStep::Truncate { .. } => "truncate",
            PlannedStep::RemoveDisplayOnly { .. } => "remove",
            PlannedStep::Mask { .. } => "mask",
            PlannedStep::SummarizeMessages { .. } => "per-message",
            PlannedStep::SummarizeSegment { .. } => "segment",
        })
        .collect();
    // Biggest output truncated first, then the display-only message, then masks oldest first.
    assert_eq!(kinds.first(), Some(&"truncate"));
    assert!(matches!(steps[0], PlannedStep::Truncate { id, .. } if id == m(4)));
    let first_remove = kinds.iter().position(|k| *k == "remove").unwrap();
    let first_mask = kinds.iter().position(|k| *k == "mask").unwrap();
    assert!(kinds[..first_remove].iter().all(|k| *k == "truncate"));
    assert!(first_remove < first_mask);
    let status = session.verify_target();
    assert!(status.reached, "{status:?} after {kinds:?}");
    let compaction = session.finish().unwrap();
    assert_eq!(
        expand(&compaction.messages, &compaction.archive).unwrap(),
        conversation.to_messages()
    );
    // The masked results keep their call ids: pairs are intact.
    let stub = compaction
        .messages
        .iter()
        .find(|m| m.role == Role::Tool && m.text().starts_with("[compressed] read src/a.rs"));
    assert_eq!(stub.and_then(|m| m.tool_call_id.as_deref()), Some("a"));
}
