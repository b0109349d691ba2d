//! Whatever hides an artifact keeps its name, and more room never keeps less: property tests
//! over random conversations whose tool outputs, calls and prose name artifacts (error lines,
//! error types, test names, commands, paths), judged by the compaction crate's own extractor
//! (`ArtifactLedger`). Examples are in `stub_names.rs`, the same two rules on every corpus
//! transcript in `corpus.rs`.

use std::cell::Cell;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRng, TestRunner};
use troupe_compaction::artifacts::ArtifactLedger;
use troupe_compaction::invariants::validate;
use troupe_compaction::summary::{MechanicalSummarizer, Summarizer};
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{CompactOptions, Compaction, ContextPolicy, compact, expand};
use troupe_protocol::{ChatMessage, Conversation, MessageKind, ToolCall};
use troupe_tokens::{CharEstimateCounter, TokenCounter};

use super::support::{FixedSummarizer, artifacts, block_on, kept};

/// What one tool output holds besides filler: each a few artifacts an engineer would look up.
#[derive(Debug, Clone)]
enum Finding {
    /// `FAILED tests/test_mN.py::test_caseN - AssertionError` lines.
    FailedTest(usize),
    /// A Python error line, `ValueErrorN`-style types.
    ErrorLine(usize),
    /// An error type or a test name mentioned in passing (a file read shows them).
    Mention(usize),
    /// A test run's list: this many passed tests, one a line (an output that is mostly names).
    Many(usize),
}

#[derive(Debug, Clone)]
enum Turn {
    User(usize),
    /// Prose that names a path and a backticked name.
    Assistant(usize),
    /// Calls: (bash or read, filler lines, findings).
    Calls(Vec<(bool, usize, Vec<Finding>)>),
    DisplayOnly(usize),
}

fn finding() -> impl Strategy<Value = Finding> {
    prop_oneof![
        (0usize..40).prop_map(Finding::FailedTest),
        (0usize..40).prop_map(Finding::ErrorLine),
        (0usize..40).prop_map(Finding::Mention),
        (4usize..60).prop_map(Finding::Many),
    ]
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        2 => (1usize..40).prop_map(Turn::User),
        2 => (0usize..60).prop_map(Turn::Assistant),
        6 => prop::collection::vec(
            (any::<bool>(), 0usize..150, prop::collection::vec(finding(), 0..5)),
            1..3
        )
        .prop_map(Turn::Calls),
        1 => (1usize..20).prop_map(Turn::DisplayOnly),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    turns: Vec<Turn>,
    /// Target as a fraction of the conversation's tokens (the smaller window's).
    target_factor: f64,
    /// The larger window's factor over the smaller one's.
    wider: f64,
    protected_recent: usize,
    tool_limit: usize,
    per_message: bool,
    /// 0: no summarizer, 1: fixed fake, 2: mechanical.
    summarizer: u8,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(turn(), 1..24),
        0.05f64..1.1,
        1.0f64..4.0,
        0usize..6,
        24usize..400,
        any::<bool>(),
        0u8..3,
    )
        .prop_map(
            |(
                turns,
                target_factor,
                wider,
                protected_recent,
                tool_limit,
                per_message,
                summarizer,
            )| {
                Case {
                    turns,
                    target_factor,
                    wider,
                    protected_recent,
                    tool_limit,
                    per_message,
                    summarizer,
                }
            },
        )
}

fn filler(tag: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{tag} line {i} of plain output\n"))
        .collect()
}

fn output(lines: usize, findings: &[Finding], call: usize) -> String {
    let mut out = filler(&format!("out{call}"), lines / 2);
    for f in findings {
        out.push_str(&match f {
            Finding::FailedTest(n) => {
                format!("FAILED tests/test_m{n}.py::test_case{n} - AssertionError\n")
            }
            Finding::ErrorLine(n) => format!("ValueError{n}Error: bad value {n}\n"),
            Finding::Mention(n) => format!("    raise Kind{n}Exception  # see test_helper{n}\n"),
            Finding::Many(n) => (0..*n)
                .map(|i| format!("tests/test_list.py::test_item{call}_{i} PASSED\n"))
                .collect(),
        });
    }
    out.push_str(&filler(&format!("tail{call}"), lines - lines / 2));
    out
}

fn build(case: &Case) -> Conversation {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("You are a careful coding agent."));
    c.push(ChatMessage::user("Make the tests pass."));
    let mut call_no = 0;
    for turn in &case.turns {
        match turn {
            Turn::User(n) => {
                c.push(ChatMessage::user(filler("ask", *n)));
            }
            Turn::Assistant(n) => {
                c.push(ChatMessage::assistant(format!(
                    "Looking at src/pkg/mod{n}.py and `Loader{n}.load` next.\n{}",
                    filler("say", *n)
                )));
            }
            Turn::Calls(calls) => {
                let mut tool_calls = Vec::new();
                let mut results = Vec::new();
                for (bash, lines, findings) in calls {
                    call_no += 1;
                    let id = format!("call_{call_no}");
                    let call = if *bash {
                        let command = format!(
                            r#"{{"command":"pytest -x tests/test_m{}.py"}}"#,
                            call_no % 9
                        );
                        ToolCall::new(&id, "bash", command)
                    } else {
                        ToolCall::new(&id, "read", format!(r#"{{"path":"src/f{call_no}.py"}}"#))
                    };
                    tool_calls.push(call);
                    results.push(ChatMessage::tool_result(
                        &id,
                        output(*lines, findings, call_no),
                    ));
                }
                c.push(ChatMessage::assistant_tool_calls(None, tool_calls));
                for r in results {
                    c.push(r);
                }
            }
            Turn::DisplayOnly(n) => {
                c.push(
                    ChatMessage::assistant(format!(
                        "shown test_display{n}\n{}",
                        filler("show", *n)
                    ))
                    .with_kind(MessageKind::DisplayOnly),
                );
            }
        }
    }
    c
}

fn policy(case: &Case, tokens: usize, factor: f64) -> ContextPolicy {
    let window = ((tokens as f64 * factor / 0.4) as usize).max(1);
    ContextPolicy {
        context_window: window,
        protected_recent: case.protected_recent,
        tool_output_limit_tokens: case.tool_limit,
        summary_max_tokens: 200,
        ..ContextPolicy::for_window(window)
    }
}

fn run(case: &Case, conversation: &Conversation, policy: &ContextPolicy) -> Compaction {
    let counter = CharEstimateCounter;
    let ledger = ledger_from_transcript(conversation.messages());
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
    block_on(compact(
        conversation,
        &ledger,
        policy,
        &counter,
        summarizer,
        options,
    ))
    .unwrap_or_else(|e| panic!("compaction failed: {e}"))
}

fn runner(cases: u32) -> TestRunner {
    // A fixed seed: the coverage checks below need cases that mask, truncate and summarize.
    let config = Config {
        cases,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    TestRunner::new_with_rng(config, rng)
}

/// An artifact named in a span a compaction removed is named in its result, or the report
/// lists it as dropped for room with the tokens it would have taken.
#[test]
fn whatever_hides_an_artifact_keeps_its_name() {
    let hidden_somewhere = Cell::new(0usize);
    let dropped_somewhere = Cell::new(0usize);
    let mut runner = runner(250);
    let result = runner.run(&case(), |case| {
        let conversation = build(&case);
        let before = conversation.to_messages();
        let tokens = CharEstimateCounter.count_messages(&before);
        let policy = policy(&case, tokens, case.target_factor);
        let compaction = run(&case, &conversation, &policy);
        validate(
            &before,
            &compaction.messages,
            &compaction.archive,
            &policy,
            &CharEstimateCounter,
        )
        .map_err(|e| TestCaseError::fail(format!("invariant broken: {e}")))?;
        prop_assert_eq!(
            expand(&compaction.messages, &compaction.archive).unwrap(),
            before.clone()
        );
        let report = &compaction.report;
        let all = artifacts(&before);
        let kept = kept(&all, &compaction.messages);
        for dropped in &report.dropped_for_room {
            prop_assert!(dropped.tokens > 0, "{:?}", dropped);
        }
        let lost: Vec<&String> = all
            .difference(&kept)
            .filter(|name| !report.dropped_for_room.iter().any(|d| &d.name == *name))
            .collect();
        prop_assert!(
            lost.is_empty(),
            "named before, not named after and not reported as dropped: {:?}\ntiers {:?}",
            lost,
            report.tiers
        );
        // Coverage: a stub or a cut output that lists what it hides.
        let named_by_stub = compaction.messages.iter().any(|m| {
            m.kind == MessageKind::CompressedStub && !ArtifactLedger::parse(&m.text()).is_empty()
        });
        hidden_somewhere.set(hidden_somewhere.get() + usize::from(named_by_stub));
        dropped_somewhere
            .set(dropped_somewhere.get() + usize::from(!report.dropped_for_room.is_empty()));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(hidden_somewhere.get() > 0, "no stub named what it hid");
    assert!(
        dropped_somewhere.get() > 0,
        "no case ran out of room for a list"
    );
}

/// On the same conversation, compacting to a larger window keeps every artifact a smaller one
/// keeps.
#[test]
fn more_room_never_keeps_less() {
    let differed = Cell::new(0usize);
    let mut runner = runner(250);
    let result = runner.run(&case(), |case| {
        let conversation = build(&case);
        let before = conversation.to_messages();
        let tokens = CharEstimateCounter.count_messages(&before);
        let all = artifacts(&before);
        let small = run(&case, &conversation, &policy(&case, tokens, case.target_factor));
        let wide = policy(&case, tokens, case.target_factor * case.wider);
        let large = run(&case, &conversation, &wide);
        let (small_kept, large_kept) = (
            kept(&all, &small.messages),
            kept(&all, &large.messages),
        );
        let lost: Vec<&String> = small_kept.difference(&large_kept).collect();
        prop_assert!(
            lost.is_empty(),
            "the larger window ({}) lost what the smaller ({}) kept: {:?}\nsmall tiers {:?}, large tiers {:?}",
            large.report.context_window,
            small.report.context_window,
            lost,
            small.report.tiers,
            large.report.tiers
        );
        differed.set(differed.get() + usize::from(small.messages != large.messages));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        differed.get() > 0,
        "no case compacted differently at the two windows"
    );
}
