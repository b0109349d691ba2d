//! The mechanical summary: which lines it picks, and summaries sized to the room left.

use troupe_compaction::summary::{MechanicalSummarizer, Summarizer};
use troupe_compaction::summary::{missing_sections, render_message, segment_prompt};
use troupe_compaction::transcript::parse_transcript;
use troupe_compaction::{CompactOptions, ContextPolicy, compact};
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, Conversation, ToolCall};
use troupe_tokens::{CharEstimateCounter, TiktokenCounter, TokenCounter};

use super::support::{FixedSummarizer, block_on, corpus_files};

/// The mechanical summary of `messages` (rendered as compaction renders them).
fn summarize(messages: &[ChatMessage], max_output_tokens: usize) -> String {
    let conversation = Conversation::from_messages(messages.to_vec());
    let owners = troupe_compaction::invariants::tool_call_owners(conversation.messages());
    let rendered: String = conversation
        .messages()
        .iter()
        .enumerate()
        .map(|(i, m)| {
            render_message(
                m,
                troupe_compaction::invariants::tool_name(conversation.messages(), owners[i], i),
            )
        })
        .collect();
    let prompt = segment_prompt(&rendered, None, None, max_output_tokens);
    block_on(MechanicalSummarizer::new().summarize(prompt)).unwrap()
}

/// The item lines under `## heading` (up to the next `## `).
fn section(summary: &str, heading: &str) -> Vec<String> {
    let mut lines = summary
        .lines()
        .skip_while(|l| l.trim() != format!("## {heading}"));
    lines.next();
    lines
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| !l.trim().is_empty() && !l.starts_with("### "))
        .map(str::to_string)
        .collect()
}

/// The picked text of an item: inside its quotes when quoted, else after the bullet.
fn picked(item: &str) -> &str {
    match (item.find('"'), item.rfind('"')) {
        (Some(a), Some(b)) if b > a => &item[a + 1..b],
        _ => item.trim_start_matches(|c: char| c.is_ascii_digit() || "-*. ".contains(c)),
    }
}

fn turn(user: &str, assistant: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::user(user), ChatMessage::assistant(assistant)]
}

#[test]
fn markdown_headings_are_never_decisions() {
    let messages = turn(
        "Why does the parser drop the last token?",
        "## Root Cause Analysis\nThe loop stops one short because the bound is exclusive.",
    );
    let text = summarize(&messages, 800);
    let decisions = section(&text, "Key Decisions").join("\n");
    assert!(!decisions.contains("Root Cause Analysis"), "{text}");
    assert!(decisions.contains("bound is exclusive"), "{text}");
}

#[test]
fn lead_in_lines_ending_with_a_colon_are_refused() {
    let messages = turn(
        "Fix the crash in the importer.",
        "The fix is:\n```rust\nlet end = len; // because the range is exclusive\n```\nDone.",
    );
    let text = summarize(&messages, 800);
    for heading in ["Key Decisions", "Next Steps"] {
        let items = section(&text, heading).join("\n");
        assert!(!items.contains("The fix is"), "{heading}: {text}");
        assert!(!items.contains("let end"), "{heading}: {text}");
    }
}

#[test]
fn pasted_shell_output_is_refused() {
    let mut messages = turn("Set up the project.", "Created the crate.");
    messages.push(ChatMessage::user(
        "Here is what I see\n$ ls\nCargo.toml  src  tests\nPlease add a README next.",
    ));
    let text = summarize(&messages, 800);
    let next = section(&text, "Next Steps").join("\n");
    assert!(next.contains("Please add a README next"), "{text}");
    assert!(!next.contains("$ ls"), "{text}");
    assert!(!next.contains("Cargo.toml  src"), "{text}");
}

#[test]
fn a_stated_choice_is_a_key_decision() {
    let messages = turn(
        "The import is slow on big files.",
        "I looked at both decoders. Let's go with the streaming decoder for the large files. Reading the code now.",
    );
    let text = summarize(&messages, 800);
    let decisions = section(&text, "Key Decisions").join("\n");
    assert!(
        decisions.contains("Let's go with the streaming decoder for the large files"),
        "{text}"
    );
    assert!(!decisions.contains("I looked at both decoders"), "{text}");
}

#[test]
fn the_last_assistant_intent_is_a_next_step() {
    let mut messages = turn("Update the release.", "Now I'll read the lexer.");
    messages.extend(turn(
        "Looks right.",
        "The tests pass. Next, I will update the changelog.",
    ));
    let text = summarize(&messages, 800);
    let next = section(&text, "Next Steps").join("\n");
    assert!(next.contains("Next, I will update the changelog"), "{text}");
    assert!(!next.contains("read the lexer"), "{text}");
}

#[test]
fn a_user_correction_is_kept_in_the_goal() {
    let mut messages = turn("Add a CSV export to the report command.", "Working on it.");
    messages.extend(turn("Actually, make it JSON instead of CSV.", "Switching."));
    messages.extend(turn("Looks good so far.", "Thanks."));
    let text = summarize(&messages, 800);
    let goal = section(&text, "Goal").join("\n");
    assert!(goal.contains("Add a CSV export"), "{text}");
    assert!(
        goal.contains("Actually, make it JSON instead of CSV"),
        "{text}"
    );
    assert!(!goal.contains("Looks good so far"), "{text}");
}

#[test]
fn the_goal_keeps_the_request_and_only_the_newest_corrections() {
    let mut messages = turn(
        "Port the theme selector to the new TUI.",
        "Reading the files.",
    );
    for i in 0..8 {
        messages.extend(turn(
            &format!("Actually, use color number {i} instead."),
            "Done.",
        ));
    }
    let text = summarize(&messages, 400);
    let goal = section(&text, "Goal").join("\n");
    assert!(goal.contains("Port the theme selector"), "{text}");
    assert!(goal.contains("color number 7"), "{text}");
    assert!(
        !goal.contains("color number 4"),
        "only the newest three: {text}"
    );
    // The Goal does not crowd everything else out of a small budget.
    assert!(
        !section(&text, "Next Steps").join("").contains("(none)"),
        "{text}"
    );
}

#[test]
fn a_lone_request_is_the_next_step() {
    let text = summarize(
        &[ChatMessage::user("Fix the flaky login test in auth.rs.")],
        400,
    );
    let next = section(&text, "Next Steps").join("\n");
    assert!(next.contains("Fix the flaky login test"), "{text}");
}

#[test]
fn tool_output_never_becomes_a_decision() {
    let messages = vec![
        ChatMessage::user("Run the tests."),
        ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new("c1", "bash", r#"{"command":"cargo test"}"#)],
        ),
        ChatMessage::tool_result("c1", "note: we decided to skip this because it is slow"),
    ];
    let text = summarize(&messages, 800);
    assert!(
        !section(&text, "Key Decisions")
            .join("\n")
            .contains("skip this"),
        "{text}"
    );
}

#[test]
fn the_mechanical_summary_never_exceeds_its_budget() {
    let mut messages = Vec::new();
    for i in 0..30 {
        messages.extend(turn(
            &format!("Actually, please also handle case {i}; don't touch the public API."),
            &format!(
                "I'll use approach {i} because it keeps the API stable. Next, I will test case {i}."
            ),
        ));
    }
    let counter = CharEstimateCounter;
    // 80 tokens hold the six headings, placeholders and a short Goal.
    for budget in [80, 100, 150, 200, 300, 500, 800, 1_200] {
        let text = summarize(&messages, budget);
        assert!(
            counter.count(&text) <= budget,
            "{} > {budget}: {text}",
            counter.count(&text)
        );
        assert!(missing_sections(&text).is_empty(), "{text}");
        assert!(
            section(&text, "Goal").join("\n").contains("case 0"),
            "{text}"
        );
    }
}

/// A first request, 20 old turns (~9k tokens), then five recent messages taking ~2.9k of the
/// 3.2k target of an 8k window.
fn crowded_session() -> Conversation {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("You are a careful coding agent."));
    c.push(ChatMessage::user(
        "Port the importer to the new storage API.",
    ));
    for t in 0..20 {
        let id = format!("c{t}");
        c.push(ChatMessage::assistant_tool_calls(
            Some(format!(
                "I'll use the batch writer for table {t} because it is faster."
            )),
            vec![ToolCall::new(
                &id,
                "read",
                format!(r#"{{"path":"src/table{t}.rs"}}"#),
            )],
        ));
        c.push(ChatMessage::tool_result(
            &id,
            format!("table {t} row with some words\n").repeat(40),
        ));
        c.push(ChatMessage::user(format!(
            "Good, now table {} please. {}",
            t + 1,
            "Keep the old behaviour for empty rows. ".repeat(20)
        )));
    }
    let recent = "The recent discussion holds details that must stay verbatim. ".repeat(38);
    for i in 0..5 {
        let text = format!("{i}: {recent}");
        c.push(if i % 2 == 0 {
            ChatMessage::assistant(text)
        } else {
            ChatMessage::user(text)
        });
    }
    c
}

#[test]
fn a_summary_sized_to_the_room_left_reaches_the_target() {
    let conversation = crowded_session();
    let policy = ContextPolicy::for_window(8_000);
    let counter = CharEstimateCounter;
    let protected: usize = conversation.messages()[conversation.len() - 5..]
        .iter()
        .map(|m| counter.count(&m.text()))
        .sum();
    assert!(protected > policy.target_tokens() * 8 / 10, "{protected}");
    let compaction = block_on(compact(
        &conversation,
        &FileLedger::new(),
        &policy,
        &counter,
        Some(&MechanicalSummarizer::new()),
        CompactOptions::default(),
    ))
    .unwrap();
    let report = &compaction.report;
    assert!(report.reached, "{}", report.reason);
    assert!(
        report.tokens_after <= policy.target_tokens(),
        "{} > {}",
        report.tokens_after,
        policy.target_tokens()
    );
}

#[test]
fn the_summarizer_is_told_the_room_left_and_its_answer_is_fitted_to_it() {
    let conversation = crowded_session();
    let policy = ContextPolicy::for_window(8_000);
    let counter = CharEstimateCounter;
    let staying: usize = conversation.messages()[conversation.len() - 5..]
        .iter()
        .map(|m| counter.count_message(m))
        .sum();
    let summarizer = FixedSummarizer::new(100_000);
    let compaction = block_on(compact(
        &conversation,
        &FileLedger::new(),
        &policy,
        &counter,
        Some(&summarizer),
        CompactOptions::default(),
    ))
    .unwrap();
    let prompts = summarizer.prompts();
    assert!(!prompts.is_empty());
    for prompt in &prompts {
        assert!(
            prompt.max_output_tokens <= policy.target_tokens() - staying,
            "{} tokens asked for, {} left",
            prompt.max_output_tokens,
            policy.target_tokens() - staying
        );
        let said = format!("at most {} tokens", prompt.max_output_tokens);
        assert!(prompt.user.contains(&said), "{}", prompt.user);
    }
    assert!(compaction.report.reached, "{}", compaction.report.reason);
}

#[test]
fn corpus_summaries_pick_no_headings_lead_ins_or_shell_lines() {
    let Some(files) = corpus_files() else { return };
    let counter = TiktokenCounter::default();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let transcript = parse_transcript(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let text = summarize(&transcript.messages, 4_000);
        assert!(counter.count(&text) <= 4_000 * 5 / 4, "{name}");
        println!("--- {name}\n{text}");
        for heading in ["Key Decisions", "Next Steps"] {
            for item in section(&text, heading) {
                let content = picked(&item).trim().trim_end_matches('…').trim_end();
                assert!(
                    !content.starts_with('#'),
                    "{name} {heading}: heading {item}"
                );
                assert!(!content.ends_with(':'), "{name} {heading}: lead-in {item}");
                assert!(!content.starts_with('$'), "{name} {heading}: shell {item}");
            }
        }
    }
}

/// A long shell session: every command distinct, so the summary's `<commands>` block is large.
fn shell_session(turns: usize) -> Conversation {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("You are a careful coding agent."));
    c.push(ChatMessage::user("Make the test suite pass."));
    for t in 0..turns {
        let id = format!("c{t}");
        c.push(ChatMessage::assistant_tool_calls(
            Some(format!(
                "Now I'll check step {t}. {}",
                "The previous run showed the fixture loads in the expected order. ".repeat(6)
            )),
            vec![ToolCall::new(
                &id,
                "bash",
                format!(
                    r#"{{"command":"cd packages/crate_{t}/src/module_{t} && cargo test -p crate_{t} --lib module_{t}::tests::case_{t} -- --nocapture --test-threads 1 | tail -n 40"}}"#
                ),
            )],
        ));
        c.push(ChatMessage::tool_result(
            &id,
            format!("running test module_{t}::tests::case ... ok\n").repeat(12)
                + "Command exited with code 0",
        ));
    }
    c
}

/// The planner picks the segment to summarize with room for the summary's real wrapping: a big
/// artifact block must not starve the first summary's budget, miss the target and make the
/// next step fold the whole conversation into one summary.
#[test]
fn a_big_artifact_block_does_not_make_the_planner_summarize_everything() {
    let conversation = shell_session(160);
    let counter = TiktokenCounter::default();
    let policy = ContextPolicy::for_window(32_000);
    let total = counter.count_messages(&conversation.to_messages());
    assert!(total > policy.trigger_tokens(), "{total}");
    let result = block_on(compact(
        &conversation,
        &FileLedger::new(),
        &policy,
        &counter,
        Some(&MechanicalSummarizer::new()),
        CompactOptions::default(),
    ))
    .unwrap();
    let report = &result.report;
    assert!(report.reached, "{report:?}");
    assert_eq!(report.tiers.segment_summaries, 1, "{report:?}");
    assert!(
        report.tokens_after * 2 > report.target_tokens,
        "compacted far below the target ({} of {}): more was summarized than needed",
        report.tokens_after,
        report.target_tokens
    );
    // And with that room, the commands the summarized turns ran are still named (the
    // artifact blocks take up to half the target; these 160 commands need a little more).
    let text: String = result
        .messages
        .iter()
        .map(|m| {
            let calls: String = m
                .calls()
                .iter()
                .map(|c| c.function.arguments.clone())
                .collect();
            m.text() + &calls
        })
        .collect();
    let named = (0..160)
        .filter(|t| text.contains(&format!("cargo test -p crate_{t} --lib")))
        .count();
    assert!(named >= 128, "only {named} of 160 commands are still named");
}
