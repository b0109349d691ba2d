//! Overflow safety: summarization input split to fit the summarizer's window, then folded.

use std::sync::atomic::Ordering;

use troupe_compaction::summary::{SummarizerError, SummaryKind};
use troupe_compaction::summary::{missing_sections, summarize_folded};
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{CompactOptions, ContextPolicy, compact};
use troupe_tokens::{CharEstimateCounter, TiktokenCounter};

use super::support::{FixedSummarizer, block_on, coding_session, lines};

#[test]
fn large_segment_is_folded_and_no_request_exceeds_the_window() {
    let conversation = coding_session(30, 60);
    let ledger = ledger_from_transcript(conversation.messages());
    // Summaries only: a huge tool limit and no masking gain would still leave tier 3 the work,
    // but tiers 1–2 run first anyway; the point is the summarizer's tiny window.
    let policy = ContextPolicy {
        summary_max_tokens: 300,
        ..ContextPolicy::for_window(3_000)
    };
    let summarizer = FixedSummarizer::new(1_500);
    let compaction = block_on(compact(
        &conversation,
        &ledger,
        &policy,
        &CharEstimateCounter,
        Some(&summarizer),
        CompactOptions::default(),
    ))
    .unwrap();
    let calls = summarizer.calls.load(Ordering::SeqCst);
    assert!(calls > 1, "expected folding, got {calls} call(s)");
    assert!(summarizer.largest_request.load(Ordering::SeqCst) <= 1_500);
    assert_eq!(compaction.report.summarizer.calls, calls);
    let prompts = summarizer.prompts();
    assert_eq!(prompts[0].kind, SummaryKind::Segment);
    assert!(
        prompts[1..]
            .iter()
            .all(|p| p.kind == SummaryKind::Update && p.user.contains("<previous-summary>"))
    );
    assert!(prompts.iter().all(|p| p.max_output_tokens <= 1_500 / 4));
    assert!(compaction.report.reached, "{}", compaction.report.reason);
}

#[test]
fn a_single_block_larger_than_the_window_is_clipped_to_fit() {
    let counter = TiktokenCounter::default();
    let blocks = vec![
        format!("[m3 tool bash]\n{}", lines("huge", 3_000)),
        "[m4 user]\nthanks".to_string(),
    ];
    let summarizer = FixedSummarizer::with_counter(2_000, Box::new(TiktokenCounter::default()));
    let outcome = block_on(summarize_folded(
        &blocks,
        None,
        None,
        400,
        &summarizer,
        &counter,
    ))
    .unwrap();
    assert!(summarizer.largest_request.load(Ordering::SeqCst) <= 2_000);
    assert!(outcome.calls >= 1);
    assert!(missing_sections(&outcome.summary).is_empty());
    let first = &summarizer.prompts()[0];
    assert!(
        first
            .user
            .contains("clipped to fit the summarizer's window")
    );
}

#[test]
fn a_window_too_small_for_any_request_is_an_error_not_an_oversized_request() {
    let summarizer = FixedSummarizer::new(300);
    let blocks = vec!["[m3 user]\nhello".to_string()];
    let error = block_on(summarize_folded(
        &blocks,
        None,
        None,
        50,
        &summarizer,
        &CharEstimateCounter,
    ))
    .unwrap_err();
    assert!(
        matches!(error, SummarizerError::WindowTooSmall { window: 300, .. }),
        "{error}"
    );
    assert_eq!(summarizer.calls.load(Ordering::SeqCst), 0);
}
