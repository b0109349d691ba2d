//! Tier 3: the structured summary, iterative merging, focus, per-message mode, fallbacks.

use troupe_compaction::summary::{MechanicalSummarizer, Summarizer, SummaryKind};
use troupe_compaction::summary::{missing_sections, parse_summary_message};
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{CompactOptions, Compaction, ContextPolicy, compact, expand};
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, Conversation, MessageKind, Role, ToolCall};
use troupe_tokens::CharEstimateCounter;

use super::support::{
    EmptySummarizer, FailingSummarizer, FixedSummarizer, block_on, coding_session, lines,
};

/// A policy whose target forces tier 3 on `coding_session(12, 40)`.
fn tight_policy() -> ContextPolicy {
    ContextPolicy {
        summary_max_tokens: 400,
        ..ContextPolicy::for_window(2_500)
    }
}

fn run(
    conversation: &Conversation,
    ledger: &FileLedger,
    policy: &ContextPolicy,
    summarizer: Option<&dyn Summarizer>,
    options: CompactOptions,
) -> Compaction {
    block_on(compact(
        conversation,
        ledger,
        policy,
        &CharEstimateCounter,
        summarizer,
        options,
    ))
    .unwrap()
}

fn summaries(messages: &[ChatMessage]) -> Vec<&ChatMessage> {
    messages
        .iter()
        .filter(|m| m.kind == MessageKind::Summary)
        .collect()
}

#[test]
fn summary_has_six_sections_and_ledger_file_lists() {
    let conversation = coding_session(12, 40);
    let ledger = ledger_from_transcript(conversation.messages());
    let summarizer = FixedSummarizer::new(50_000);
    let compaction = run(
        &conversation,
        &ledger,
        &tight_policy(),
        Some(&summarizer),
        CompactOptions::default(),
    );
    assert!(compaction.report.reached, "{}", compaction.report.reason);
    assert_eq!(compaction.report.tiers.segment_summaries, 1);
    let summary = summaries(&compaction.messages)[0];
    assert_eq!(summary.role, Role::User);
    let text = summary.text();
    let parsed = parse_summary_message(&text).unwrap();
    assert!(missing_sections(&parsed.body).is_empty(), "{text}");
    // The lists come from the ledger: every module the summarized turns edited is listed.
    assert!(!parsed.files.modified.is_empty());
    for path in &parsed.files.modified {
        assert!(ledger.modified_files().contains(path));
    }
    // The summary names the original ids it replaced, recoverably.
    let archived: Vec<_> = compaction
        .archive
        .replaced_by(summary.id)
        .iter()
        .map(|m| m.id)
        .collect();
    assert!(!archived.is_empty());
    for id in &parsed.replaces {
        assert!(
            compaction.archive.original(*id).is_some(),
            "{id} named but not archived"
        );
    }
    let prompt = &summarizer.prompts()[0];
    assert_eq!(prompt.kind, SummaryKind::Segment);
    assert!(prompt.system.contains("## Critical Context"));
}

#[test]
fn second_compaction_merges_the_first_summary_and_unites_file_lists() {
    let conversation = coding_session(12, 40);
    let ledger = ledger_from_transcript(conversation.messages());
    let policy = tight_policy();
    let first = run(
        &conversation,
        &ledger,
        &policy,
        Some(&MechanicalSummarizer::new()),
        CompactOptions::default(),
    );
    let first_files = parse_summary_message(&summaries(&first.messages)[0].text())
        .unwrap()
        .files;

    // The agent keeps working on new files; then compaction runs again.
    let mut later = conversation.clone();
    first.apply_to(&mut later);
    for t in 100..110 {
        let id = format!("w{t}");
        later.push(ChatMessage::user(format!("Please also update module {t}.")));
        later.push(ChatMessage::assistant_tool_calls(
            Some(format!("Writing module {t}.")),
            vec![ToolCall::new(
                &id,
                "write",
                format!(r#"{{"path":"src/new{t}.rs","content":"x"}}"#),
            )],
        ));
        later.push(ChatMessage::tool_result(&id, lines("written", 30)));
    }
    later.push(ChatMessage::assistant("Done with the new modules."));
    later.push(ChatMessage::user("Great."));
    let mut ledger2 = ledger.clone();
    ledger2.extend(&ledger_from_transcript(later.messages()));

    let summarizer = FixedSummarizer::new(50_000);
    let second = run(
        &later,
        &ledger2,
        &policy,
        Some(&summarizer),
        CompactOptions::default(),
    );
    assert!(
        second.report.tiers.segment_summaries >= 1,
        "{}",
        second.report.reason
    );
    let prompts = summarizer.prompts();
    let update = prompts
        .iter()
        .find(|p| p.kind == SummaryKind::Update)
        .expect("an update prompt");
    assert!(update.user.contains("<previous-summary>"));
    assert!(update.user.contains("## Goal"));
    let merged = summaries(&second.messages);
    assert_eq!(
        merged.len(),
        1,
        "the first summary was merged, not kept beside the new one"
    );
    let files = parse_summary_message(&merged[0].text()).unwrap().files;
    for path in first_files.modified.iter().chain(&first_files.read) {
        assert!(
            files.modified.contains(path) || files.read.contains(path),
            "{path} dropped"
        );
    }
    assert!(
        files.modified.iter().any(|p| p.starts_with("src/new")),
        "new files missing: {files:?}"
    );
    // Archives of both compactions chained restore the very first conversation, followed by
    // what was added after the first compaction.
    let mut archive = first.archive.clone();
    archive.extend(&second.archive);
    let mut full = conversation.to_messages();
    full.extend_from_slice(&later.to_messages()[first.messages.len()..]);
    assert_eq!(expand(&second.messages, &archive).unwrap(), full);
}

#[test]
fn focus_instructions_reach_the_summarizer() {
    let conversation = coding_session(12, 40);
    let ledger = ledger_from_transcript(conversation.messages());
    let summarizer = FixedSummarizer::new(50_000);
    let options = CompactOptions {
        focus: Some("the parser bug".into()),
        ..CompactOptions::default()
    };
    run(
        &conversation,
        &ledger,
        &tight_policy(),
        Some(&summarizer),
        options,
    );
    assert!(
        summarizer
            .prompts()
            .iter()
            .all(|p| p.user.contains("Additional focus: the parser bug"))
    );
}

#[test]
fn summarizer_failure_keeps_tier_one_two_result_and_says_why() {
    let conversation = coding_session(12, 40);
    let ledger = ledger_from_transcript(conversation.messages());
    for summarizer in [&FailingSummarizer as &dyn Summarizer, &EmptySummarizer] {
        let compaction = run(
            &conversation,
            &ledger,
            &tight_policy(),
            Some(summarizer),
            CompactOptions::default(),
        );
        let report = &compaction.report;
        assert!(!report.reached);
        assert!(report.tiers.masked > 0, "tier 2 result kept");
        assert_eq!(report.tiers.segment_summaries, 0);
        assert!(
            report.reason.contains("summarizer failed"),
            "{}",
            report.reason
        );
        assert!(report.tokens_after < report.tokens_before);
    }
}

#[test]
fn without_summarizer_only_tiers_one_two_run_and_the_reason_says_so() {
    let conversation = coding_session(12, 40);
    let ledger = ledger_from_transcript(conversation.messages());
    let compaction = run(
        &conversation,
        &ledger,
        &tight_policy(),
        None,
        CompactOptions::default(),
    );
    assert!(!compaction.report.reached);
    assert!(
        compaction.report.reason.contains("no summarizer"),
        "{}",
        compaction.report.reason
    );
}

#[test]
fn per_message_mode_bounds_user_and_assistant_messages() {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("sys"));
    c.push(ChatMessage::user("task"));
    for i in 0..6 {
        c.push(ChatMessage::user(format!(
            "question {i}: {}",
            "please explain the details ".repeat(40)
        )));
        c.push(ChatMessage::assistant(format!(
            "answer {i}: {}",
            "here is a long explanation ".repeat(150)
        )));
    }
    for i in 0..5 {
        c.push(ChatMessage::user(format!("recent {i}")));
    }
    let policy = ContextPolicy {
        summary_max_tokens: 400,
        ..ContextPolicy::for_window(10_000)
    };
    let options = CompactOptions {
        per_message: true,
        ..CompactOptions::default()
    };
    let compaction = run(
        &c,
        &FileLedger::new(),
        &policy,
        Some(&MechanicalSummarizer::new()),
        options,
    );
    assert!(compaction.report.reached, "{}", compaction.report.reason);
    assert!(compaction.report.tiers.per_message_summarized > 0);
    let counter = CharEstimateCounter;
    use troupe_tokens::TokenCounter;
    for m in compaction
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Summary)
    {
        let body = m.text();
        let body = body
            .lines()
            .next()
            .unwrap()
            .trim_start_matches("[summarized] ");
        let bound = if m.role == Role::User {
            policy.per_message_user_tokens
        } else {
            policy.per_message_assistant_tokens
        };
        assert!(
            counter.count(body) <= bound,
            "{} tokens > {bound}: {body}",
            counter.count(body)
        );
    }
    assert_eq!(
        expand(&compaction.messages, &compaction.archive).unwrap(),
        c.to_messages()
    );
}
