//! Pinned messages (#33): never compacted, byte-identical after every compaction like the
//! protected ones, the task still found behind a pinned rules message, and a target the pins
//! put out of reach said so in the report.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRng, TestRunner};
use troupe_compaction::invariants::{
    InvariantViolation, ProtectedSet, ProtectionReason, ValidationContext, check_invariants,
    validate,
};
use troupe_compaction::summary::{MechanicalSummarizer, Summarizer};
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{Archive, CompactOptions, ContextPolicy, compact, expand};
use troupe_protocol::{ChatMessage, Conversation, ToolCall};
use troupe_tokens::{CharEstimateCounter, TokenCounter};

use super::support::{FixedSummarizer, block_on, lines};

/// One turn of a random conversation, and whether its messages are pinned.
#[derive(Debug, Clone)]
enum Turn {
    User(usize, bool),
    Assistant(usize, bool),
    /// Output lines of each parallel call, and which results are pinned.
    Calls(Vec<(usize, bool)>),
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        2 => (1usize..60, prop::bool::weighted(0.2)).prop_map(|(n, p)| Turn::User(n, p)),
        2 => (1usize..90, prop::bool::weighted(0.2)).prop_map(|(n, p)| Turn::Assistant(n, p)),
        4 => prop::collection::vec((0usize..120, prop::bool::weighted(0.15)), 1..4)
            .prop_map(Turn::Calls),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    /// A pinned rules message ahead of the task.
    rules: bool,
    turns: Vec<Turn>,
    target_factor: f64,
    protected_recent: usize,
    tool_limit: usize,
    mechanical: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        prop::collection::vec(turn(), 1..30),
        0.05f64..1.2,
        0usize..5,
        16usize..300,
        any::<bool>(),
    )
        .prop_map(
            |(rules, turns, target_factor, protected_recent, tool_limit, mechanical)| Case {
                rules,
                turns,
                target_factor,
                protected_recent,
                tool_limit,
                mechanical,
            },
        )
}

fn words(tag: &str, n: usize) -> String {
    (0..n).map(|i| format!("{tag}{i} ")).collect()
}

fn pin_if(message: ChatMessage, pinned: bool) -> ChatMessage {
    if pinned { message.pinned() } else { message }
}

fn build(case: &Case) -> Conversation {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("You are a helpful agent."));
    if case.rules {
        c.push(ChatMessage::user("Project rules: never force-push; run the tests.").pinned());
    }
    c.push(ChatMessage::user("The task: make the tests pass."));
    let mut call_no = 0;
    for turn in &case.turns {
        match turn {
            Turn::User(n, p) => {
                c.push(pin_if(ChatMessage::user(words("ask", *n)), *p));
            }
            Turn::Assistant(n, p) => {
                c.push(pin_if(ChatMessage::assistant(words("say", *n)), *p));
            }
            Turn::Calls(calls) => {
                let mut tool_calls = Vec::new();
                let mut results = Vec::new();
                for (out, pinned) in calls {
                    call_no += 1;
                    let id = format!("call_{call_no}");
                    let args = format!(r#"{{"path":"src/f{}.rs"}}"#, call_no % 7);
                    tool_calls.push(ToolCall::new(&id, "read", args));
                    results.push(pin_if(
                        ChatMessage::tool_result(&id, lines("out", *out)),
                        *pinned,
                    ));
                }
                c.push(ChatMessage::assistant_tool_calls(None, tool_calls));
                for r in results {
                    c.push(r);
                }
            }
        }
    }
    c
}

fn policy_for(
    case: &Case,
    conversation: &Conversation,
    counter: &dyn TokenCounter,
) -> ContextPolicy {
    let tokens = counter.count_messages(&conversation.to_messages()) as f64;
    let window = ((tokens * case.target_factor / 0.4) as usize).max(1);
    ContextPolicy {
        context_window: window,
        protected_recent: case.protected_recent,
        tool_output_limit_tokens: case.tool_limit,
        summary_max_tokens: 200,
        ..ContextPolicy::for_window(window)
    }
}

#[test]
fn pinned_messages_survive_every_compaction_byte_identical_and_in_order() {
    let config = Config {
        cases: 200,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let compacted = std::cell::Cell::new(0usize);
    let result = runner.run(&case(), |case| {
        let counter = CharEstimateCounter;
        let conversation = build(&case);
        let before = conversation.to_messages();
        let ledger = ledger_from_transcript(conversation.messages());
        let policy = policy_for(&case, &conversation, &counter);
        let fixed = FixedSummarizer::new(4_000);
        let mechanical = MechanicalSummarizer::with_window(4_000);
        let summarizer: &dyn Summarizer = if case.mechanical { &mechanical } else { &fixed };
        let compaction = block_on(compact(
            &conversation,
            &ledger,
            &policy,
            &counter,
            Some(summarizer),
            CompactOptions::default(),
        ))
        .map_err(|e| TestCaseError::fail(format!("compaction failed: {e}")))?;
        if compaction.changed() {
            compacted.set(compacted.get() + 1);
        }
        let mut last = None;
        for pinned in before.iter().filter(|m| m.pinned) {
            let at = compaction
                .messages
                .iter()
                .position(|m| m.id == pinned.id)
                .ok_or_else(|| TestCaseError::fail(format!("pinned {} is gone", pinned.id)))?;
            prop_assert_eq!(&compaction.messages[at], pinned);
            prop_assert!(last.is_none_or(|l| l < at), "pinned {} moved", pinned.id);
            last = Some(at);
        }
        validate(
            &before,
            &compaction.messages,
            &compaction.archive,
            &policy,
            &counter,
        )
        .map_err(|e| TestCaseError::fail(format!("invariant: {e}")))?;
        let restored = expand(&compaction.messages, &compaction.archive)
            .map_err(|e| TestCaseError::fail(format!("expand: {e}")))?;
        prop_assert_eq!(restored, before);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The property is only worth something if compactions ran around the pins.
    assert!(
        compacted.get() > 50,
        "only {} cases compacted",
        compacted.get()
    );
}

#[test]
fn a_pinned_rules_message_ahead_of_the_task_does_not_hide_the_task() {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("s"));
    let rules = c.push(ChatMessage::user("rules").pinned());
    let task = c.push(ChatMessage::user("task"));
    let call = c.push(ChatMessage::assistant_tool_calls(
        None,
        vec![ToolCall::new("1", "read", "{}")],
    ));
    let result = c.push(ChatMessage::tool_result("1", "out").pinned());
    let set = ProtectedSet::compute(&c.to_messages(), 0);
    assert_eq!(set.reason(rules), Some(ProtectionReason::Pinned));
    assert_eq!(set.reason(task), Some(ProtectionReason::FirstUserMessage));
    // A summary keeps a call with its results: a pinned result pins its call.
    assert_eq!(set.reason(result), Some(ProtectionReason::Pinned));
    assert_eq!(set.reason(call), Some(ProtectionReason::Pinned));
}

#[test]
fn a_changed_or_dropped_pinned_message_breaks_the_invariants() {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("s"));
    c.push(ChatMessage::user("task"));
    let pinned = c.push(ChatMessage::assistant(words("rule", 200)).pinned());
    c.push(ChatMessage::assistant(words("old", 200)));
    c.push(ChatMessage::user("now"));
    let before = c.to_messages();
    let set = ProtectedSet::compute(&before, 1);
    let context = |after: &[ChatMessage]| {
        let counter = CharEstimateCounter;
        (
            counter.count_messages(&before),
            counter.count_messages(after),
        )
    };
    let archive = Archive::new();
    let check = |after: &[ChatMessage]| {
        let (tokens_before, tokens_after) = context(after);
        check_invariants(
            &before,
            after,
            &ValidationContext {
                protected: &set,
                archive: &archive,
                tokens_before,
                tokens_after,
                target_tokens: 0,
            },
        )
    };
    let mut changed = before.clone();
    changed[2] = ChatMessage {
        id: pinned,
        ..ChatMessage::assistant(words("rule", 100)).pinned()
    };
    assert_eq!(
        check(&changed),
        Err(InvariantViolation::ProtectedChanged { id: pinned })
    );
    // Unpinned is changed too: the flag is part of the bytes a pin keeps.
    let mut unpinned = before.clone();
    unpinned[2].pinned = false;
    assert_eq!(
        check(&unpinned),
        Err(InvariantViolation::ProtectedChanged { id: pinned })
    );
    let mut dropped = before.clone();
    dropped.remove(2);
    assert_eq!(
        check(&dropped),
        Err(InvariantViolation::ProtectedMissing { id: pinned })
    );
}

#[test]
fn a_target_the_pins_put_out_of_reach_is_reported_as_theirs() {
    let counter = CharEstimateCounter;
    let mut c = Conversation::new();
    c.push(ChatMessage::system("You are a coding agent."));
    c.push(ChatMessage::user(format!("Project rules:\n{}", words("rule", 3_000))).pinned());
    c.push(ChatMessage::user("Make the tests pass."));
    for t in 0..20 {
        let id = format!("call_{t}");
        c.push(ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(&id, "read", r#"{"path":"src/a.rs"}"#)],
        ));
        c.push(ChatMessage::tool_result(&id, lines("out", 40)));
        c.push(ChatMessage::user(format!("go on {t}")));
    }
    let tokens = counter.count_messages(&c.to_messages());
    // The pinned rules alone are over the target.
    let policy = ContextPolicy {
        protected_recent: 2,
        ..ContextPolicy::for_window(tokens)
    };
    let rules_tokens = counter.count_message(&c.to_messages()[1]);
    assert!(rules_tokens > policy.target_tokens());
    let ledger = ledger_from_transcript(c.messages());
    let compaction = block_on(compact(
        &c,
        &ledger,
        &policy,
        &counter,
        Some(&MechanicalSummarizer::new()),
        CompactOptions {
            trigger: troupe_protocol::CompactTrigger::Manual,
            ..CompactOptions::default()
        },
    ))
    .unwrap();
    let report = &compaction.report;
    assert!(!report.reached, "{}", report.reason);
    assert!(
        report.reason.starts_with("target unreachable")
            && report
                .reason
                .contains(&format!("1 pinned message takes {rules_tokens} of them")),
        "{}",
        report.reason
    );
    // It still did what it could around the pin.
    assert!(report.tokens_after < report.tokens_before);
    assert_eq!(compaction.messages[1], c.to_messages()[1]);
}
