//! A target the protected messages put out of reach: the summary and its artifact ledger keep
//! their room (the room they take when the target is within reach), the result stays under the
//! trigger with a margin, and the report says what was done and why.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRng, TestRunner};
use troupe_compaction::invariants::validate;
use troupe_compaction::summary::{MechanicalSummarizer, Summarizer, parse_summary_message};
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{CompactOptions, Compaction, ContextPolicy, compact, expand};
use troupe_protocol::{ChatMessage, Conversation, MessageKind, ToolCall};
use troupe_tokens::{CharEstimateCounter, TokenCounter};

use super::support::{FixedSummarizer, block_on};

/// A long structured body, so a summary fills whatever body budget it is given.
fn long_body() -> String {
    let items: String = (0..400)
        .map(|i| format!("- Detail {i}: the parser keeps state between runs of the lexer\n"))
        .collect();
    format!(
        "## Goal\n- Fix the bug the user reported\n\n## Constraints & Preferences\n- (none)\n\n## Progress\n### Done\n- [x] Investigated the code\n### In Progress\n- [ ] Writing the fix\n### Blocked\n- (none)\n\n## Key Decisions\n- Keep the API\n\n## Next Steps\n1. Run the tests\n\n## Critical Context\n{items}"
    )
}

/// Old work rich in artifacts (paths, commands, tests, errors), then a recent exchange whose
/// last user message is a paste of `paste_tokens`.
fn session(turns: usize, paste_tokens: usize) -> Conversation {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("You are a coding agent."));
    c.push(ChatMessage::user("Make the test suite pass."));
    for t in 0..turns {
        let calls = [
            (
                "bash",
                serde_json::json!({ "command": format!(
                    "cd pkg{t} && python -m pytest tests/unit/test_module_{t}.py::test_case_{t} -x"
                ) }),
            ),
            (
                "read",
                // A few files read again and again: the file lists (kept whole, whatever the
                // room) stay short, the artifact blocks carry the rest.
                serde_json::json!({ "path": format!("src/pkg/module_{}.py", t % 5) }),
            ),
            (
                "bash",
                serde_json::json!({ "command": format!(
                    "grep -rn Parser{t}State src/pkg{t}/state_{t}.py docs/notes_{t}.md"
                ) }),
            ),
        ];
        let ids: Vec<String> = (0..calls.len()).map(|k| format!("call_{t}_{k}")).collect();
        c.push(ChatMessage::assistant_tool_calls(
            Some(format!("Checking module_{t}.py and its tests.")),
            calls
                .iter()
                .zip(&ids)
                .map(|((tool, args), id)| ToolCall::new(id, *tool, args.to_string()))
                .collect(),
        ));
        for (k, id) in ids.iter().enumerate() {
            c.push(ChatMessage::tool_result(
                id,
                format!(
                    "FAILED tests/unit/test_module_{t}.py::test_case_{t}_{k}\nModule{t}x{k}Error: state leaked from run {t}\nclass Parser{t}State{k}:\n{}",
                    "output line with some words in it\n".repeat(8)
                ),
            ));
        }
        c.push(ChatMessage::user(format!("Keep going with module {t}.")));
    }
    c.push(ChatMessage::assistant("Summing up where we are."));
    c.push(ChatMessage::user(format!(
        "Here is the log:\n{}",
        "x".repeat(paste_tokens * 4)
    )));
    c
}

/// The summary messages' tokens, and the body's share of them.
fn summary_tokens(compaction: &Compaction, counter: &dyn TokenCounter) -> (usize, usize) {
    compaction
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Summary)
        .map(|m| {
            let body = parse_summary_message(&m.text()).map_or(0, |p| counter.count(&p.body));
            (counter.count_message(m), body)
        })
        .fold((0, 0), |(a, b), (x, y)| (a + x, b + y))
}

#[derive(Debug, Clone)]
struct Case {
    window: usize,
    turns: usize,
    /// The paste as a fraction of the window (the protected part around it is small).
    paste: f64,
    summary_max_tokens: usize,
    mechanical: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        8_000usize..40_000,
        60usize..160,
        0.40f64..0.85,
        200usize..2_500,
        any::<bool>(),
    )
        .prop_map(
            |(window, turns, paste, summary_max_tokens, mechanical)| Case {
                window,
                turns,
                paste,
                summary_max_tokens,
                mechanical,
            },
        )
}

#[test]
fn an_unreachable_target_keeps_the_summary_its_room_and_stays_under_the_trigger() {
    let config = Config {
        cases: 24,
        ..Config::default()
    };
    // A fixed seed: the cases must cover both sides of the ceiling (checked below).
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let seen_room = std::cell::Cell::new(0usize);
    let seen_capped = std::cell::Cell::new(0usize);
    let result = runner.run(&case(), |case| {
        let counter = CharEstimateCounter;
        let policy = ContextPolicy {
            summary_max_tokens: case.summary_max_tokens,
            ..ContextPolicy::for_window(case.window)
        };
        let paste = (case.window as f64 * case.paste) as usize;
        let conversation = session(case.turns, paste);
        let ledger = ledger_from_transcript(conversation.messages());
        let fixed = FixedSummarizer {
            text: long_body(),
            ..FixedSummarizer::new(1_000_000)
        };
        let mechanical = MechanicalSummarizer::new();
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
        let before = conversation.to_messages();
        validate(&before, &compaction.messages, &compaction.archive, &policy, &counter)
            .map_err(|e| TestCaseError::fail(format!("invariant broken: {e}")))?;
        prop_assert_eq!(
            expand(&compaction.messages, &compaction.archive).unwrap(),
            before
        );
        let report = &compaction.report;
        let raised = report
            .raised_aim
            .ok_or_else(|| TestCaseError::fail(format!("no raised aim: {}", report.reason)))?;
        // The protected part holds the paste: above the target, so the target is out of reach.
        prop_assert!(raised.fixed_tokens >= paste && raised.fixed_tokens > policy.target_tokens());
        prop_assert!(!report.reached);
        prop_assert!(report.reason.starts_with("target unreachable"), "{}", report.reason);
        let floor = policy.summary_room_tokens();
        prop_assert_eq!(raised.room_tokens, floor);
        prop_assert_eq!(raised.ceiling_tokens, policy.raised_aim_ceiling_tokens());
        prop_assert_eq!(
            raised.aim_tokens,
            (raised.fixed_tokens + floor).min(raised.ceiling_tokens)
        );
        let (summary, body) = summary_tokens(&compaction, &counter);
        let room = raised.aim_tokens.saturating_sub(raised.fixed_tokens);
        if raised.fixed_tokens + policy.min_summary_room_tokens() <= raised.ceiling_tokens {
            // The window leaves room for a summary under the trigger: the result stays there
            // (the margin absorbs a smallest summary's overshoot of a tight room).
            prop_assert!(
                report.tokens_after < policy.trigger_tokens(),
                "{} ≥ trigger {}: {}",
                report.tokens_after,
                policy.trigger_tokens(),
                report.reason
            );
        }
        if room >= 4 * policy.min_summary_room_tokens() {
            // A room worth the name: the summary stays within it, so the result stays within the
            // aim (at most the ceiling), and rich old work fills it: the summary and its ledger keep most of their
            // room instead of being squeezed to a few tokens.
            prop_assert!(
                report.tokens_after <= raised.aim_tokens,
                "summary {summary} took more than its room {room}: {report:?}"
            );
            // A summarizer that fills its body budget shows the whole room; the mechanical one
            // writes a shorter body than the third of the room it may, and the blocks fill the
            // rest. Squeezed, both would keep a few hundred tokens.
            let kept_percent = if case.mechanical { 60 } else { 90 };
            prop_assert!(
                summary * 100 >= room * kept_percent,
                "summary {summary} (body {body}) squeezed below {kept_percent}% of its room {room} (floor {floor}): {}",
                report.reason
            );
            if raised.fixed_tokens + floor <= raised.ceiling_tokens {
                seen_room.set(seen_room.get() + 1);
                prop_assert_eq!(room, floor);
            } else {
                seen_capped.set(seen_capped.get() + 1);
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(seen_room.get() > 0, "no case kept the full floor");
    assert!(seen_capped.get() > 0, "no case was capped by the ceiling");
}
