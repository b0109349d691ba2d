//! What a stub, a cut output and a later summary name of what they hide (the rule of
//! `artifacts/hidden.rs`), on a small pytest session.

use troupe_compaction::session::{CompactionSession, Refusal, ToolResultStrategy};
use troupe_compaction::summary::MechanicalSummarizer;
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{CompactOptions, ContextPolicy, compact, expand};
use troupe_protocol::{ChatMessage, Conversation, MessageId, MessageKind, ToolCall};
use troupe_tokens::CharEstimateCounter;

use super::support::{block_on, lines};

/// m1 task · m2 assistant(bash pytest) · m3 its output: filler around an error, a failed test
/// and a test name in passing · m4 user · m5 assistant(bash grep) · m6 a name-dense output ·
/// m7 user · m8 assistant.
fn pytest_session() -> Conversation {
    let output = format!(
        "{}KeyError: 'id'\ntests/test_io.py::test_roundtrip FAILED\n    # see test_helpers\n{}",
        lines("collected", 60),
        lines("log", 60)
    );
    let names: String = (0..12)
        .map(|i| format!("test_fixture_number_{i}:\n"))
        .collect();
    Conversation::from_messages([
        ChatMessage::user("Make the tests pass."),
        ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                "p",
                "bash",
                r#"{"command":"pytest -x tests/"}"#,
            )],
        ),
        ChatMessage::tool_result("p", output),
        ChatMessage::user(format!("go on {}", "now ".repeat(40))),
        ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                "g",
                "bash",
                r#"{"command":"grep -h test_ fixtures.yml"}"#,
            )],
        ),
        ChatMessage::tool_result("g", names),
        ChatMessage::user("thanks"),
        ChatMessage::assistant("done"),
    ])
}

fn tight() -> ContextPolicy {
    ContextPolicy {
        tool_output_limit_tokens: 100,
        protected_recent: 1,
        ..ContextPolicy::for_window(500)
    }
}

/// A stub names what the output named and neither its call nor its own line does: the failed
/// test with its status and the test named in passing, in the ledger's blocks (the error line
/// is the stub's first error already; the command stays in the call). A cut keeps them the
/// same way.
#[test]
fn a_stub_and_a_cut_list_what_they_hide() {
    let conversation = pytest_session();
    let ledger = ledger_from_transcript(conversation.messages());
    let counter = CharEstimateCounter;
    for strategy in [ToolResultStrategy::Mask, ToolResultStrategy::Truncate] {
        let mut session = CompactionSession::new(
            &conversation,
            &ledger,
            &tight(),
            &counter,
            CompactOptions::default(),
        )
        .unwrap();
        session
            .compress_tool_result(MessageId(3), strategy)
            .unwrap();
        let text = session.messages()[2].text();
        assert!(
            text.contains("<tests>\nfailed tests/test_io.py::test_roundtrip\n</tests>")
                && text.contains("<seen>\ntest_helpers\n</seen>")
                && text.contains("KeyError: 'id'"),
            "{strategy:?}: {text}"
        );
        assert!(
            !text.contains("<commands>"),
            "the call still names it: {text}"
        );
        let compaction = session.finish().unwrap();
        assert!(compaction.report.dropped_for_room.is_empty());
        assert_eq!(
            expand(&compaction.messages, &compaction.archive).unwrap(),
            conversation.to_messages()
        );
    }
}

/// An output that is mostly names is not masked: a stub listing them would not be half its
/// size, and one that dropped them would lose them. It stays, names and all.
#[test]
fn an_output_of_names_keeps_them_where_they_are() {
    let conversation = pytest_session();
    let ledger = ledger_from_transcript(conversation.messages());
    let counter = CharEstimateCounter;
    let mut session = CompactionSession::new(
        &conversation,
        &ledger,
        &tight(),
        &counter,
        CompactOptions::default(),
    )
    .unwrap();
    let refusal = session
        .compress_tool_result(MessageId(6), ToolResultStrategy::Mask)
        .unwrap_err();
    assert!(
        matches!(refusal, Refusal::NamesDoNotFit { names, .. } if names > 0),
        "{refusal}"
    );
    assert_eq!(session.messages(), &conversation.to_messages()[..]);
}

/// A later compaction's summary over an earlier compaction's stub keeps the names the stub
/// listed: the originals are in the earlier archive, the stub's blocks are read back.
#[test]
fn a_summary_over_an_earlier_stub_keeps_the_names_it_listed() {
    let conversation = pytest_session();
    let ledger = ledger_from_transcript(conversation.messages());
    let counter = CharEstimateCounter;
    let first = block_on(compact(
        &conversation,
        &ledger,
        &tight(),
        &counter,
        None,
        CompactOptions::default(),
    ))
    .unwrap();
    assert!(first.report.tiers.masked + first.report.tiers.truncated > 0);
    let stubbed = Conversation::from_messages(first.messages.clone());
    let narrower = ContextPolicy {
        summary_max_tokens: 100,
        protected_recent: 1,
        ..ContextPolicy::for_window(300)
    };
    let second = block_on(compact(
        &stubbed,
        &ledger,
        &narrower,
        &counter,
        Some(&MechanicalSummarizer::new()),
        CompactOptions::default(),
    ))
    .unwrap();
    assert!(
        second.report.tiers.segment_summaries > 0,
        "{:?}",
        second.report
    );
    let summary = second
        .messages
        .iter()
        .find(|m| m.kind == MessageKind::Summary)
        .unwrap()
        .text();
    assert!(
        summary.contains("failed tests/test_io.py::test_roundtrip"),
        "{summary}"
    );
}
