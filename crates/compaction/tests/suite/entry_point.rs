//! `compact` as the agent, the CLI and the supervisor call it.

use troupe_compaction::summary::MechanicalSummarizer;
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{CompactOptions, ContextPolicy, ThrashGuard, compact};
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, Conversation};
use troupe_protocol::{CompactTrigger, CompactionReport};
use troupe_tokens::{CharEstimateCounter, TokenCache};

use super::support::{block_on, coding_session};

#[test]
fn under_target_nothing_changes_and_the_report_says_so() {
    let conversation = coding_session(2, 5);
    let policy = ContextPolicy::for_window(1_000_000);
    let compaction = block_on(compact(
        &conversation,
        &FileLedger::new(),
        &policy,
        &CharEstimateCounter,
        None,
        CompactOptions::default(),
    ))
    .unwrap();
    assert!(compaction.report.no_compaction_needed);
    assert!(compaction.report.reached);
    assert!(compaction.report.reason.starts_with("no compaction needed"));
    assert!(!compaction.changed());
    assert_eq!(compaction.messages, conversation.to_messages());
}

#[test]
fn protected_messages_above_target_keep_the_summary_its_room_and_say_why() {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("s ".repeat(4_000)));
    c.push(ChatMessage::user("task"));
    c.push(ChatMessage::assistant("old answer ".repeat(2_000)));
    for i in 0..5 {
        c.push(ChatMessage::user(format!("recent {i}")));
    }
    let policy = ContextPolicy::for_window(5_000);
    let compaction = block_on(compact(
        &c,
        &FileLedger::new(),
        &policy,
        &CharEstimateCounter,
        Some(&MechanicalSummarizer::new()),
        CompactOptions::default(),
    ))
    .unwrap();
    let report = &compaction.report;
    assert!(!report.reached);
    assert!(
        report.reason.contains("protected messages alone")
            && report.reason.contains("kept their room"),
        "{}",
        report.reason
    );
    let raised = report.raised_aim.expect("the aim was raised");
    assert!(raised.fixed_tokens > policy.target_tokens());
    assert_eq!(raised.room_tokens, policy.summary_room_tokens());
    assert_eq!(raised.aim_tokens, raised.fixed_tokens + raised.room_tokens);
    assert!(
        report.tokens_after < report.tokens_before,
        "best effort still summarized the old answer"
    );
    assert!(report.tokens_after <= raised.aim_tokens, "{report:?}");
    assert!(report.tokens_after < policy.trigger_tokens());
}

#[test]
fn a_conversation_already_within_the_raised_aim_is_left_as_it_is() {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("s ".repeat(4_000)));
    c.push(ChatMessage::user("task"));
    c.push(ChatMessage::assistant("old answer ".repeat(200)));
    for i in 0..5 {
        c.push(ChatMessage::user(format!("recent {i}")));
    }
    let policy = ContextPolicy::for_window(4_000);
    let compaction = block_on(compact(
        &c,
        &FileLedger::new(),
        &policy,
        &CharEstimateCounter,
        Some(&MechanicalSummarizer::new()),
        CompactOptions::default(),
    ))
    .unwrap();
    let report = &compaction.report;
    // Under the trigger and the raised aim: summarizing the old answer to a few tokens would
    // save tokens the window still has.
    assert!(!compaction.changed());
    assert!(!report.reached && !report.no_compaction_needed);
    assert!(report.raised_aim.is_some());
    assert!(
        report
            .reason
            .starts_with("target unreachable: the protected messages alone"),
        "{}",
        report.reason
    );
}

#[test]
fn automatic_trigger_waits_for_enough_freeable_tokens() {
    let conversation = coding_session(12, 40);
    let ledger = ledger_from_transcript(conversation.messages());
    let policy = ContextPolicy {
        min_freeable_tokens: 1_000_000,
        ..ContextPolicy::for_window(2_500)
    };
    let options = CompactOptions {
        trigger: CompactTrigger::Automatic,
        ..CompactOptions::default()
    };
    let skipped = block_on(compact(
        &conversation,
        &ledger,
        &policy,
        &CharEstimateCounter,
        None,
        options,
    ))
    .unwrap();
    assert!(
        skipped
            .report
            .reason
            .starts_with("compaction skipped: not enough to free"),
        "{}",
        skipped.report.reason
    );
    assert_eq!(skipped.messages, conversation.to_messages());

    // After an unreachable attempt the guard holds off until new material accumulates (a
    // fixed target: the cost-aware one would choose a reachable one here).
    let policy = ContextPolicy {
        min_freeable_tokens: 100,
        cost_aware: false,
        ..ContextPolicy::for_window(2_500)
    };
    let manual = block_on(compact(
        &conversation,
        &ledger,
        &policy,
        &CharEstimateCounter,
        None,
        CompactOptions::default(),
    ))
    .unwrap();
    assert!(!manual.report.reached);
    let mut guard = ThrashGuard::new();
    guard.record(&manual.report);
    let mut later = conversation.clone();
    manual.apply_to(&mut later);
    later.push(ChatMessage::user("one more small thing"));
    let options = CompactOptions {
        trigger: CompactTrigger::Automatic,
        guard: Some(guard),
        ..CompactOptions::default()
    };
    let retry = block_on(compact(
        &later,
        &ledger,
        &policy,
        &CharEstimateCounter,
        None,
        options,
    ))
    .unwrap();
    assert!(
        retry.report.reason.contains("waiting for new material"),
        "{}",
        retry.report.reason
    );
    assert!(!retry.changed());
}

#[test]
fn warm_cache_counts_only_new_messages_and_result_applies_cleanly() {
    let conversation = coding_session(12, 40);
    let ledger = ledger_from_transcript(conversation.messages());
    let cache = TokenCache::new();
    cache.count_messages(&CharEstimateCounter, conversation.messages());
    let warm = cache.stats();
    let options = CompactOptions {
        token_cache: Some(cache.clone()),
        ..CompactOptions::default()
    };
    let policy = ContextPolicy::for_window(2_500);
    let compaction = block_on(compact(
        &conversation,
        &ledger,
        &policy,
        &CharEstimateCounter,
        Some(&MechanicalSummarizer::new()),
        options,
    ))
    .unwrap();
    // Every original was answered from the cache; only messages compaction built were counted.
    let after = cache.stats();
    assert!(after.hits - warm.hits >= conversation.len() as u64);
    let created = compaction
        .messages
        .iter()
        .filter(|m| conversation.get(m.id).is_none())
        .count() as u64;
    assert!(created > 0 && after.misses - warm.misses >= created);
    let mut applied = conversation.clone();
    compaction.apply_to(&mut applied);
    let next = applied.push(ChatMessage::user("next"));
    assert!(
        compaction.messages.iter().all(|m| m.id < next),
        "ids never reused"
    );
    let json = serde_json::to_string(&compaction.report).unwrap();
    let back: CompactionReport = serde_json::from_str(&json).unwrap();
    // Floats may differ in the last bit after a JSON round trip; everything else is exact.
    assert!((back.ratio - compaction.report.ratio).abs() < 1e-12);
    let exact = |r: &CompactionReport| CompactionReport {
        ratio: 0.0,
        duration_ms: 0.0,
        ..r.clone()
    };
    assert_eq!(exact(&back), exact(&compaction.report));
}

#[test]
fn compact_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let conversation = Conversation::new();
    let ledger = FileLedger::new();
    let policy = ContextPolicy::default();
    let future = compact(
        &conversation,
        &ledger,
        &policy,
        &CharEstimateCounter,
        None,
        CompactOptions::default(),
    );
    assert_send(&future);
    drop(future);
}
