//! The built-in counters' upper bounds hold: a budget check that trusts a bound to skip
//! tokenizing would otherwise miss a warning or a trigger.

use proptest::prelude::*;
use troupe_protocol::{ChatMessage, ToolCall};
use troupe_tokens::{BpeEncoding, CharEstimateCounter, TiktokenCounter, TokenCounter};

use super::support::corpus_files;

fn counters() -> Vec<Box<dyn TokenCounter>> {
    vec![
        Box::new(TiktokenCounter::default()),
        Box::new(TiktokenCounter::new(BpeEncoding::Cl100kBase)),
        Box::new(CharEstimateCounter),
    ]
}

/// Texts a tokenizer finds hard: any Unicode, special-token spellings, long runs of one
/// character, whitespace and digits.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "(<\\|endoftext\\|>|<\\|im_start\\|>|[ \\n\\t]|[0-9]{1,5}|é|🦀|a{1,40}){0,30}",
        "[\\PC]{0,200}",
    ]
}

fn assert_bounded(counter: &dyn TokenCounter, message: &ChatMessage) -> Result<(), String> {
    let exact = counter.count_message(message);
    let bound = counter
        .count_message_upper_bound(message)
        .ok_or_else(|| format!("{} promises no bound", counter.name()))?;
    if bound < exact {
        return Err(format!(
            "{}: bound {bound} < exact {exact} for {message:?}",
            counter.name()
        ));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn bounds_are_never_below_the_count(content in text(), name in text(), arguments in text()) {
        for counter in counters() {
            let bound = counter.count_upper_bound(&content);
            prop_assert!(bound.is_some_and(|b| b >= counter.count(&content)));
            let calls = ChatMessage::assistant_tool_calls(
                Some(content.clone()),
                vec![ToolCall::new("c1", name.clone(), arguments.clone())],
            );
            let result = ChatMessage::tool_result("c1", content.clone());
            for message in [ChatMessage::user(content.clone()), calls, result] {
                prop_assert!(assert_bounded(counter.as_ref(), &message).is_ok(), "{:?}",
                    assert_bounded(counter.as_ref(), &message));
            }
        }
    }
}

/// Every message of the real transcripts, under the default counter.
#[test]
fn bounds_hold_on_every_corpus_message() {
    let Some(files) = corpus_files() else { return };
    let counter = TiktokenCounter::default();
    let mut checked = 0;
    for path in files {
        let transcript = troupe_compaction::transcript::parse_transcript(
            &std::fs::read_to_string(&path).unwrap(),
        )
        .unwrap();
        for message in &transcript.messages {
            assert_bounded(&counter, message).unwrap();
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} corpus messages");
}
