//! Living a transcript like an agent, for the emulated strategies: before every assistant
//! message there is a model call whose prompt is the strategy's current context; at its trigger
//! the strategy compacts first, and its summarizer calls are billed as the compaction's.

use std::borrow::Cow;

use troupe::protocol::{ChatMessage, Role};
use troupe::tokens::TokenCounter;

use super::summarizer::SummarizerCall;
use super::tally::{Outcome, Tally};

/// What every strategy is given besides the conversation.
pub(super) struct Env<'a> {
    pub(super) window: usize,
    pub(super) counter: &'a dyn TokenCounter,
    /// The summary body's bound, the same for every strategy (troupe's `summary_max_tokens`
    /// for the window), so that the summaries differ only in what they are given.
    pub(super) summary_tokens: usize,
}

/// An emulated compaction strategy.
pub(super) trait Peer {
    /// Before a model call: compact `history` in place when this strategy's trigger says so,
    /// and return the summarizer calls that took; `None` when it did not compact.
    fn compact(
        &mut self,
        history: &mut Vec<ChatMessage>,
        env: &Env<'_>,
    ) -> Option<Vec<SummarizerCall>>;

    /// The prompt a model call is sent, made from the history (by default the history itself;
    /// observation masking rewrites old tool results at every call).
    fn present<'h>(&self, history: &'h [ChatMessage]) -> Cow<'h, [ChatMessage]> {
        Cow::Borrowed(history)
    }
}

/// Live `transcript` with `peer` and bill every prompt.
pub(super) fn live(transcript: &[ChatMessage], peer: &mut dyn Peer, env: &Env<'_>) -> Outcome {
    let mut tally = Tally::new(transcript, env.counter);
    let mut history: Vec<ChatMessage> = Vec::new();
    for (fed, message) in transcript.iter().enumerate() {
        if message.role == Role::Assistant && !history.is_empty() {
            if let Some(calls) = peer.compact(&mut history, env) {
                for call in &calls {
                    tally.summarizer_call(&call.messages, call.output_tokens);
                }
                tally.compacted(fed, &peer.present(&history));
            }
            let sent = peer.present(&history).into_owned();
            tally.agent_call(fed, sent, env.counter.count_message(message));
        }
        history.push(message.clone());
    }
    tally.finish()
}
