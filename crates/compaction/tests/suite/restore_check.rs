//! The invariant that a compaction can be undone: `check_invariants` restores the input from
//! the compacted messages and the archive (borrowing, not copying, since #56) and must still
//! notice an archived original that is not the message it replaced, field by field.

use troupe_compaction::Archive;
use troupe_compaction::expand;
use troupe_compaction::invariants::{
    InvariantViolation, ProtectedSet, ValidationContext, check_invariants,
};
use troupe_protocol::{ChatMessage, MessageId, MessageKind, ToolCall};

/// A system prompt, a call, its long result, a question.
fn before() -> Vec<ChatMessage> {
    let mut system = ChatMessage::system("You fix bugs.");
    system.id = MessageId(1);
    let mut call = ChatMessage::assistant_tool_calls(
        None,
        vec![ToolCall::new("a", "bash", r#"{"command":"pytest"}"#)],
    );
    call.id = MessageId(2);
    let mut result: ChatMessage = serde_json::from_str(
        r#"{"role":"tool","tool_call_id":"a","name":"bash","content":"FAILED tests/test_io.py::test_roundtrip\nKeyError: 'id'"}"#,
    )
    .expect("a tool message with a field troupe does not interpret");
    result.id = MessageId(3);
    let mut question = ChatMessage::user("And now?");
    question.id = MessageId(4);
    vec![system, call, result, question]
}

/// `before` with its result replaced by a stub `m5`, and an archive holding `original` as
/// what the stub replaced.
fn compacted(before: &[ChatMessage], original: ChatMessage) -> (Vec<ChatMessage>, Archive) {
    let mut after = before.to_vec();
    let mut stub = before[2].with_text("[compressed] bash returned 2 lines");
    stub.id = MessageId(5);
    stub.kind = MessageKind::CompressedStub;
    after[2] = stub;
    let mut archive = Archive::new();
    archive.record_replacement(MessageId(5), [original]);
    (after, archive)
}

fn check(
    before: &[ChatMessage],
    after: &[ChatMessage],
    archive: &Archive,
) -> Result<(), InvariantViolation> {
    let protected = ProtectedSet::compute(before, 1);
    check_invariants(
        before,
        after,
        &ValidationContext {
            protected: &protected,
            archive,
            tokens_before: 100,
            tokens_after: 50,
            target_tokens: 10,
        },
    )
}

#[test]
fn an_archive_holding_the_original_restores_it_and_passes() {
    let before = before();
    let (after, archive) = compacted(&before, before[2].clone());
    assert_eq!(check(&before, &after, &archive), Ok(()));
    assert_eq!(expand(&after, &archive).expect("restorable"), before);
}

/// A change made to an archived original.
type Edit = fn(&mut ChatMessage);

#[test]
fn an_archived_original_that_differs_in_any_field_is_not_a_restore() {
    let before = before();
    let edits: [(&str, Edit); 6] = [
        ("its text", |m| {
            m.set_text("FAILED tests/test_io.py::test_roundtrip")
        }),
        ("its kind", |m| m.kind = MessageKind::CompressedStub),
        ("its pin", |m| m.pinned = true),
        ("its id", |m| m.id = MessageId(9)),
        ("its call id", |m| m.tool_call_id = Some("b".into())),
        ("a field troupe keeps verbatim", |m| {
            m.extra.remove("name");
        }),
    ];
    for (what, edit) in edits {
        let mut original = before[2].clone();
        edit(&mut original);
        let (after, archive) = compacted(&before, original);
        assert!(
            matches!(
                check(&before, &after, &archive),
                Err(InvariantViolation::NotRecoverable { .. })
            ),
            "an original changed in {what} must fail the check"
        );
    }
}
