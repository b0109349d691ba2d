//! A compaction's receipt: what it cost against the provider's prompt cache and what it saves.
//!
//! A compaction shrinks the prompt, so every later call reads fewer tokens — but the messages
//! it rewrote and everything after the first of them are no longer a cached prefix, so the next
//! call pays for them fresh, and its summarizer calls cost too. The receipt puts both sides in
//! one number, in uncached-input-token units:
//!
//! ```text
//! net_saving = (tokens_before − tokens_after) × cached_read × expected_turns
//!            − rebilled_tokens × (fresh − cached_read)
//!            − summarizer_billed
//! ```
//!
//! where `rebilled_tokens` are the tokens of the messages after the kept prefix
//! (`tokens_after − cached_prefix_kept` less the request's few reply-priming tokens) and `fresh` is what a token of
//! a new prefix costs ([`CostModel::fresh_prefix_rate`]: input for OpenAI, the write rate for
//! Anthropic, whose last block troupe marks).

use std::borrow::Borrow;

use troupe_protocol::{ChatMessage, CompactionReceipt, Role, SummarizerUsage};

use super::model::CostModel;
use troupe_tokens::TokenCounter;
use troupe_tokens::prompt_cache::block_key;

// The receipt's data is troupe_protocol's `CompactionReceipt`, so a `CompactionReport` (which
// lives below this crate) can carry it.

/// The receipt of a compaction from `before` to `after` under `model`: `summarizer_billed` is
/// what its summarizer calls cost (see [`summarizer_billed`]), `expected_turns` how many calls
/// the agent makes before the next compaction (see [`expected_turns`]).
///
/// The messages may be owned or shared (`&[ChatMessage]`, a conversation's
/// `&[Arc<ChatMessage>]`); tokens are counted as [`TokenCounter::count_messages`] does.
pub fn receipt<B: Borrow<ChatMessage>, A: Borrow<ChatMessage>>(
    before: &[B],
    after: &[A],
    counter: &dyn TokenCounter,
    model: &CostModel,
    summarizer_billed: f64,
    expected_turns: f64,
) -> CompactionReceipt {
    let tokens = |messages: &mut dyn Iterator<Item = &ChatMessage>| -> usize {
        messages.map(|m| counter.count_message(m)).sum()
    };
    let priming = counter.overhead().reply_priming;
    let kept = each(before)
        .zip(each(after))
        .take_while(|(b, a)| block_key(b) == block_key(a))
        .count();
    let cached_prefix_kept = tokens(&mut each(&after[..kept]));
    // The messages past the kept prefix; the request's reply priming (a few tokens, paid by
    // every call alike) is left out, so an unchanged conversation re-bills nothing.
    let rebilled_tokens = tokens(&mut each(&after[kept..]));
    let tokens_before = tokens(&mut each(before)) + priming;
    let tokens_after = cached_prefix_kept + rebilled_tokens + priming;
    let rates = model.rates();
    let freed = tokens_before as f64 - tokens_after as f64;
    let net_saving = freed * rates.cached_read * expected_turns
        - rebilled_tokens as f64 * (model.fresh_prefix_rate() - rates.cached_read)
        - summarizer_billed;
    CompactionReceipt {
        tokens_before,
        tokens_after,
        cached_prefix_kept,
        rebilled_tokens,
        summarizer_billed,
        expected_turns,
        net_saving,
        pricing: model.name().to_string(),
    }
}

/// The messages of a slice of owned or shared ones.
fn each<M: Borrow<ChatMessage>>(messages: &[M]) -> impl Iterator<Item = &ChatMessage> {
    messages.iter().map(|m| m.borrow())
}

/// What a compaction's summarizer calls cost: an inline call (the agent's own conversation
/// plus an instruction, [`SummarizerUsage::inline_input_tokens`]) rides the agent's cached
/// prompt and is priced at the cached rate; every other input token at the uncached rate (an
/// upper bound: replay's emulation measures what a separate prompt shares with earlier ones).
pub fn summarizer_billed(usage: &SummarizerUsage, model: &CostModel) -> f64 {
    let rates = model.rates();
    let inline = usage.inline_input_tokens.min(usage.input_tokens);
    (usage.input_tokens - inline) as f64 * rates.input + inline as f64 * rates.cached_read
}

/// How many calls the agent makes before the next compaction, estimated from the
/// conversation: the room a compaction leaves under the trigger (`trigger_tokens −
/// tokens_after`) over the mean tokens one turn added so far (the tokens after the system
/// prompt over the assistant messages, each one model call). At least 1: the next call always
/// comes.
pub fn expected_turns<M: Borrow<ChatMessage>>(
    conversation: &[M],
    counter: &dyn TokenCounter,
    trigger_tokens: usize,
    tokens_after: usize,
) -> f64 {
    let turns = each(conversation)
        .filter(|m| m.role == Role::Assistant)
        .count();
    let grown: usize = each(conversation)
        .skip_while(|m| m.role.is_instructions())
        .map(|m| counter.count_message(m))
        .sum();
    if turns == 0 || grown == 0 {
        return 1.0;
    }
    let per_turn = grown as f64 / turns as f64;
    (trigger_tokens.saturating_sub(tokens_after) as f64 / per_turn).max(1.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_tokens::CharEstimateCounter;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn a_receipt_matches_the_hand_computation() {
        let counter = CharEstimateCounter;
        let system = ChatMessage::system("s".repeat(4000));
        let old = ChatMessage::tool_result("c1", "x".repeat(8000));
        let new = ChatMessage::user("u".repeat(400));
        let before = vec![system.clone(), old, new.clone()];
        let stub = ChatMessage::tool_result("c1", "[masked]");
        let after = vec![system.clone(), stub, new];
        let b = counter.count_messages(&before);
        let a = counter.count_messages(&after);
        let kept = counter.count_message(&system);
        let r = receipt(&before, &after, &counter, &CostModel::openai(), 50.0, 4.0);
        assert_eq!((r.tokens_before, r.tokens_after), (b, a));
        assert_eq!(r.cached_prefix_kept, kept);
        let priming = counter.overhead().reply_priming;
        assert_eq!(r.rebilled_tokens, a - kept - priming);
        let hand = (b - a) as f64 * 0.1 * 4.0 - (a - kept - priming) as f64 * 0.9 - 50.0;
        assert!(close(r.net_saving, hand), "{} vs {hand}", r.net_saving);
        // Anthropic pays the fresh prefix at the write rate.
        let r = receipt(
            &before,
            &after,
            &counter,
            &CostModel::anthropic(),
            50.0,
            4.0,
        );
        let hand = (b - a) as f64 * 0.1 * 4.0 - (a - kept - priming) as f64 * 1.15 - 50.0;
        assert!(close(r.net_saving, hand));
    }

    #[test]
    fn an_unchanged_conversation_rebills_nothing() {
        let counter = CharEstimateCounter;
        let messages = vec![ChatMessage::system("s"), ChatMessage::user("u")];
        let r = receipt(
            &messages,
            &messages,
            &counter,
            &CostModel::openai(),
            0.0,
            3.0,
        );
        assert_eq!(r.rebilled_tokens, 0);
        assert!(close(r.net_saving, 0.0));
    }

    #[test]
    fn expected_turns_is_room_over_growth_per_turn_and_at_least_one() {
        let counter = CharEstimateCounter;
        let conversation = vec![
            ChatMessage::system("s".repeat(400)),
            ChatMessage::user("u".repeat(392)),
            ChatMessage::assistant("a".repeat(388)),
        ];
        let grown: usize = conversation[1..]
            .iter()
            .map(|m| counter.count_message(m))
            .sum();
        let turns = expected_turns(&conversation, &counter, 10_000, 4_000);
        assert!(close(turns, 6_000.0 / grown as f64));
        assert!(close(
            expected_turns(&conversation, &counter, 100, 4_000),
            1.0
        ));
        assert!(close(
            expected_turns(&conversation[..1], &counter, 10_000, 0),
            1.0
        ));
    }

    #[test]
    fn summarizer_calls_are_billed_uncached_unless_inline() {
        let usage = SummarizerUsage {
            calls: 2,
            input_tokens: 3000,
            output_tokens: 400,
            ..SummarizerUsage::default()
        };
        assert!(close(
            summarizer_billed(&usage, &CostModel::anthropic()),
            3000.0
        ));
        // An inline call rides the agent's cached prompt.
        let usage = SummarizerUsage {
            inline_calls: 1,
            inline_input_tokens: 2000,
            ..usage
        };
        assert!(close(
            summarizer_billed(&usage, &CostModel::openai()),
            1000.0 + 200.0
        ));
    }
}
