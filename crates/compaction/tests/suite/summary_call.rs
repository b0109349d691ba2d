//! The form of each summary call is chosen per compaction from the cost model (#42): a
//! summarizer that can continue the agent's conversation (the agent's own model) is asked
//! inline unless the segment's own prompt bills less than reading the agent's prompt cached.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use troupe_compaction::economics::{CostModel, Rates};
use troupe_compaction::session::CompactionSession;
use troupe_compaction::summary::{InlineSummary, Summarizer, SummarizerError, SummaryPrompt};
use troupe_compaction::{CompactOptions, ContextPolicy};
use troupe_protocol::Conversation;
use troupe_protocol::FileLedger;
use troupe_tokens::CharEstimateCounter;

use super::support::{FixedSummarizer, block_on, coding_session};

/// The agent's own model as the compression agent sees it: it takes either road, and counts
/// which one it was asked on.
struct EitherRoad {
    inner: FixedSummarizer,
    inline_calls: AtomicUsize,
}

impl EitherRoad {
    fn new() -> Self {
        EitherRoad {
            inner: FixedSummarizer::new(200_000),
            inline_calls: AtomicUsize::new(0),
        }
    }

    /// (inline calls, calls with a prompt of their own)
    fn calls(&self) -> (usize, usize) {
        (
            self.inline_calls.load(Ordering::SeqCst),
            self.inner.calls.load(Ordering::SeqCst),
        )
    }
}

#[async_trait]
impl Summarizer for EitherRoad {
    fn context_window(&self) -> usize {
        self.inner.context_window()
    }

    async fn summarize(&self, prompt: SummaryPrompt) -> Result<String, SummarizerError> {
        self.inner.summarize(prompt).await
    }

    fn inline_overhead(&self) -> Option<usize> {
        Some(0)
    }

    async fn summarize_inline(&self, _request: InlineSummary) -> Result<String, SummarizerError> {
        self.inline_calls.fetch_add(1, Ordering::SeqCst);
        Ok(self.inner.text.clone())
    }
}

/// Summarize `conversation`'s messages `first..=last` (indices) under `policy` with `summarizer`.
fn summarize_span(
    conversation: &Conversation,
    policy: &ContextPolicy,
    first: usize,
    last: usize,
    summarizer: &EitherRoad,
) {
    let ledger = FileLedger::new();
    let counter = CharEstimateCounter;
    let mut session = CompactionSession::new(
        conversation,
        &ledger,
        policy,
        &counter,
        CompactOptions::default(),
    )
    .unwrap();
    let ids: Vec<_> = session.messages().iter().map(|m| m.id).collect();
    block_on(session.compress_segment(ids[first], ids[last], None, summarizer)).unwrap();
}

fn policy() -> ContextPolicy {
    ContextPolicy {
        summary_max_tokens: 400,
        ..ContextPolicy::for_window(24_000)
    }
}

#[test]
fn a_small_segment_beside_a_long_conversation_is_summarized_on_its_own() {
    // ~17k tokens; the first turn (read, edit, test, follow-up) is a few hundred: its
    // own prompt bills less than a tenth of the conversation read cached.
    let conversation = coding_session(30, 40);
    let small = EitherRoad::new();
    summarize_span(&conversation, &policy(), 2, 7, &small);
    assert_eq!(small.calls(), (0, 1));
    // Twenty turns of it: reading the conversation cached is cheaper.
    let large = EitherRoad::new();
    summarize_span(&conversation, &policy(), 2, 121, &large);
    assert_eq!(large.calls(), (1, 0));
}

#[test]
fn the_choice_follows_the_policys_pricing() {
    let conversation = coding_session(30, 40);
    // Cached reads at the full price: the large segment is cheaper on its own too.
    let flat = ContextPolicy {
        pricing: Some(CostModel::openai().with_rates(Rates {
            cached_read: 1.0,
            ..Rates::OPENAI
        })),
        ..policy()
    };
    let large = EitherRoad::new();
    summarize_span(&conversation, &flat, 2, 121, &large);
    assert_eq!(large.calls(), (0, 1));
}
