//! Property tests: random conversations with tool pairs, parallel calls, display-only messages,
//! earlier summaries and protected ranges; every invariant and `expand(compact(x)) == x`, for
//! every tier, through `compact` and through random sequences of the primitives.

use std::cell::Cell;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRng, TestRunner};
use troupe_compaction::invariants::validate;
use troupe_compaction::session::{CompactionSession, ToolResultStrategy};
use troupe_compaction::summary::{MechanicalSummarizer, Summarizer};
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{CompactOptions, ContextPolicy, compact, expand};
use troupe_protocol::{ChatMessage, Conversation, MessageKind, ToolCall};
use troupe_tokens::{CharEstimateCounter, TokenCounter};

use super::support::{FixedSummarizer, block_on, lines};

#[derive(Debug, Clone)]
enum Turn {
    User(usize),
    Assistant(usize),
    /// Parallel calls: (tool index, output lines), and whether results come back reversed.
    Calls(Vec<(usize, usize)>, bool),
    DisplayOnly(usize),
    EarlierSummary,
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        3 => (1usize..60).prop_map(Turn::User),
        3 => (1usize..90).prop_map(Turn::Assistant),
        6 => (prop::collection::vec((0usize..4, 0usize..120), 1..4), any::<bool>())
            .prop_map(|(calls, reversed)| Turn::Calls(calls, reversed)),
        1 => (1usize..30).prop_map(Turn::DisplayOnly),
        1 => Just(Turn::EarlierSummary),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    system: bool,
    turns: Vec<Turn>,
    /// Target as a fraction of the conversation's tokens.
    target_factor: f64,
    protected_recent: usize,
    tool_limit: usize,
    per_message: bool,
    /// 0: no summarizer, 1: fixed fake, 2: mechanical.
    summarizer: u8,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        prop::collection::vec(turn(), 0..30),
        0.05f64..1.3,
        0usize..7,
        16usize..300,
        any::<bool>(),
        0u8..3,
    )
        .prop_map(
            |(
                system,
                turns,
                target_factor,
                protected_recent,
                tool_limit,
                per_message,
                summarizer,
            )| Case {
                system,
                turns,
                target_factor,
                protected_recent,
                tool_limit,
                per_message,
                summarizer,
            },
        )
}

const TOOLS: [&str; 4] = ["read", "edit", "write", "bash"];

fn words(tag: &str, n: usize) -> String {
    (0..n).map(|i| format!("{tag}{i} ")).collect()
}

fn build(case: &Case) -> Conversation {
    let mut c = Conversation::new();
    if case.system {
        c.push(ChatMessage::system("You are a helpful agent."));
    }
    c.push(ChatMessage::user("The task: make the tests pass."));
    let mut call_no = 0;
    for turn in &case.turns {
        match turn {
            Turn::User(n) => {
                c.push(ChatMessage::user(words("ask", *n)));
            }
            Turn::Assistant(n) => {
                c.push(ChatMessage::assistant(words("say", *n)));
            }
            Turn::Calls(calls, reversed) => {
                let mut tool_calls = Vec::new();
                let mut results = Vec::new();
                for (tool, out) in calls {
                    call_no += 1;
                    let id = format!("call_{call_no}");
                    let args = format!(r#"{{"path":"src/f{}.rs"}}"#, call_no % 7);
                    tool_calls.push(ToolCall::new(&id, TOOLS[*tool], args));
                    results.push(ChatMessage::tool_result(&id, lines("out", *out)));
                }
                if *reversed {
                    results.reverse();
                }
                c.push(ChatMessage::assistant_tool_calls(None, tool_calls));
                for r in results {
                    c.push(r);
                }
            }
            Turn::DisplayOnly(n) => {
                c.push(
                    ChatMessage::assistant(words("shown", *n)).with_kind(MessageKind::DisplayOnly),
                );
            }
            Turn::EarlierSummary => {
                let text = "<summary>\n## Goal\n- the earlier goal\n</summary>\n\n<read-files>\nsrc/old.rs\n</read-files>\n\n[replaces m1]";
                c.push(ChatMessage::user(text).with_kind(MessageKind::Summary));
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

#[derive(Default)]
struct Seen {
    truncated: Cell<usize>,
    masked: Cell<usize>,
    removed: Cell<usize>,
    per_message: Cell<usize>,
    summaries: Cell<usize>,
    unchanged: Cell<usize>,
}

fn bump(cell: &Cell<usize>, by: usize) {
    cell.set(cell.get() + by);
}

#[test]
fn compact_keeps_every_invariant_and_expands_back() {
    let seen = Seen::default();
    // A fixed seed: the coverage check below asserts that every tier ran in some case, which a
    // random draw of 300 cases does not guarantee (per-message summarizing is rare). The cases
    // are still generated, shrunk and checked as properties; they are the same every run.
    let config = Config {
        cases: 300,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&case(), |case| {
        let counter = CharEstimateCounter;
        let conversation = build(&case);
        let ledger = ledger_from_transcript(conversation.messages());
        let policy = policy_for(&case, &conversation, &counter);
        let fixed = FixedSummarizer::new(4_000);
        let mechanical = MechanicalSummarizer::with_window(4_000);
        let summarizer: Option<&dyn Summarizer> = match case.summarizer {
            0 => None,
            1 => Some(&fixed),
            _ => Some(&mechanical),
        };
        let options = CompactOptions {
            per_message: case.per_message,
            ..CompactOptions::default()
        };
        let compaction = block_on(compact(
            &conversation,
            &ledger,
            &policy,
            &counter,
            summarizer,
            options,
        ))
        .map_err(|e| TestCaseError::fail(format!("compaction failed: {e}")))?;
        let before = &conversation.to_messages()[..];
        validate(
            before,
            &compaction.messages,
            &compaction.archive,
            &policy,
            &counter,
        )
        .map_err(|e| TestCaseError::fail(format!("invariant broken: {e}")))?;
        prop_assert_eq!(
            expand(&compaction.messages, &compaction.archive).unwrap(),
            before.to_vec()
        );
        let report = &compaction.report;
        prop_assert_eq!(
            report.tokens_after,
            counter.count_messages(&compaction.messages)
        );
        prop_assert!(report.tokens_after <= report.tokens_before);
        prop_assert_eq!(report.reached, report.tokens_after <= report.target_tokens);
        if report.no_compaction_needed {
            prop_assert_eq!(&compaction.messages, &before.to_vec());
            prop_assert!(report.reason.starts_with("no compaction needed"));
        } else if !report.reached {
            prop_assert!(
                report.reason.starts_with("target unreachable"),
                "{}",
                report.reason
            );
        }
        // Without a summarizer tier 3 never runs, and the report says so when it mattered.
        if case.summarizer == 0 {
            prop_assert_eq!(
                report.tiers.segment_summaries + report.tiers.per_message_summarized,
                0
            );
        }
        bump(&seen.truncated, report.tiers.truncated);
        bump(&seen.masked, report.tiers.masked);
        bump(&seen.removed, report.tiers.display_only_removed);
        bump(&seen.per_message, report.tiers.per_message_summarized);
        bump(&seen.summaries, report.tiers.segment_summaries);
        bump(&seen.unchanged, usize::from(report.no_compaction_needed));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The property is only as good as its coverage: every tier must have run somewhere.
    for (name, cell) in [
        ("truncated", &seen.truncated),
        ("masked", &seen.masked),
        ("display-only removed", &seen.removed),
        ("per-message summarized", &seen.per_message),
        ("segment summaries", &seen.summaries),
        ("no compaction needed", &seen.unchanged),
    ] {
        assert!(cell.get() > 0, "no case exercised {name}");
    }
}

#[derive(Debug, Clone)]
enum Op {
    Truncate(usize),
    Mask(usize),
    Segment(usize, usize),
    Individually(usize, usize),
    RemoveDisplayOnly(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..200).prop_map(Op::Truncate),
        (0usize..200).prop_map(Op::Mask),
        (0usize..200, 0usize..200).prop_map(|(a, b)| Op::Segment(a, b)),
        (0usize..200, 0usize..200).prop_map(|(a, b)| Op::Individually(a, b)),
        (0usize..200).prop_map(Op::RemoveDisplayOnly),
    ]
}

/// Whatever an agent asks, the session either applies a valid operation or refuses and
/// changes nothing; the result always validates.
#[test]
fn random_primitive_calls_apply_or_refuse_cleanly() {
    let applied = Cell::new(0usize);
    let refused = Cell::new(0usize);
    let mut runner = TestRunner::new(Config {
        cases: 200,
        ..Config::default()
    });
    let strategy = (case(), prop::collection::vec(op(), 1..25));
    let result = runner.run(&strategy, |(mut case, ops)| {
        case.target_factor = case.target_factor.min(0.9);
        let counter = CharEstimateCounter;
        let conversation = build(&case);
        let ledger = ledger_from_transcript(conversation.messages());
        let policy = policy_for(&case, &conversation, &counter);
        let summarizer = FixedSummarizer::new(4_000);
        let mut session = CompactionSession::new(
            &conversation,
            &ledger,
            &policy,
            &counter,
            CompactOptions::default(),
        )
        .unwrap();
        for op in ops {
            let ids: Vec<_> = session.messages().iter().map(|m| m.id).collect();
            let pick = |i: usize| ids[i % ids.len()];
            let snapshot = session.messages().to_vec();
            let total = session.verify_target().current;
            let result = match op {
                Op::Truncate(i) => {
                    session.compress_tool_result(pick(i), ToolResultStrategy::Truncate)
                }
                Op::Mask(i) => session.compress_tool_result(pick(i), ToolResultStrategy::Mask),
                Op::Segment(a, b) => {
                    block_on(session.compress_segment(pick(a), pick(b), None, &summarizer))
                }
                Op::Individually(a, b) => {
                    block_on(session.compress_messages_individually(pick(a), pick(b), &summarizer))
                }
                Op::RemoveDisplayOnly(i) => session.remove_display_only(pick(i)),
            };
            match result {
                Ok(step) => {
                    applied.set(applied.get() + 1);
                    prop_assert!(step.tokens_after < step.tokens_before);
                    prop_assert!(session.verify_target().current < total);
                }
                Err(refusal) => {
                    refused.set(refused.get() + 1);
                    prop_assert!(!refusal.to_string().is_empty());
                    prop_assert_eq!(
                        session.messages(),
                        &snapshot[..],
                        "refusal `{}` changed the conversation",
                        refusal
                    );
                }
            }
        }
        let compaction = session
            .finish()
            .map_err(|e| TestCaseError::fail(format!("invalid result: {e}")))?;
        prop_assert_eq!(
            expand(&compaction.messages, &compaction.archive).unwrap(),
            conversation.to_messages()
        );
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        applied.get() > 0 && refused.get() > 0,
        "applied {} refused {}",
        applied.get(),
        refused.get()
    );
}
