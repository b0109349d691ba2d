//! `codex`, emulated from its documented auto-compaction: at about 90 % of the window it asks
//! the model, inline, for a summary (the conversation plus the summarization prompt — it rides
//! the cached prefix); the new history is the initial context, then the newest user messages
//! up to 20k tokens, then the summary. When the compaction request itself overflows the window,
//! the oldest items are dropped and it is retried (a request the provider refuses is not billed,
//! so only the one that fits is).
//!
//! The 20k budget assumes a 200k window and is scaled to the window ([`scaled`]): 3.2k at 32k.

use troupe::protocol::{ChatMessage, MessageKind, Role};
use troupe::tokens::TokenCounter;

use super::live::{Env, Peer};
use super::summarizer::{
    SummarizerCall, leading_system, scaled, summarize, summary_message, truncate_to,
};

/// The auto-compact limit, as a fraction of the window.
const TRIGGER: f64 = 0.9;
/// The newest user messages kept, in tokens.
const USER_MESSAGES_TOKENS: usize = 20_000;

/// Codex's summarization prompt, in short.
const INSTRUCTION: &str = "You have exceeded the maximum number of tokens, please stop coding \
and instead write a short memento message for the next agent. Your note should: summarize what \
you finished and what still needs work; include a concise list of files, commands and decisions; \
and note anything the next agent needs to continue.";

/// What the summary message starts with (Codex's bridge to the new history).
const SUMMARY_LEAD: &str = "Another language model started to solve this problem and produced a \
summary of its thinking process. Use it to build on the work that has already been done:\n";

#[derive(Default)]
pub(super) struct Codex;

impl Codex {
    pub(super) fn trigger_tokens(window: usize) -> usize {
        (window as f64 * TRIGGER) as usize
    }
}

/// The newest real user messages (not summaries) whose tokens add up to at most `budget`, in
/// order; the one that crosses the budget is kept cut to what is left.
pub(super) fn newest_user_messages(
    history: &[ChatMessage],
    budget: usize,
    counter: &dyn TokenCounter,
) -> Vec<ChatMessage> {
    let mut left = budget;
    let mut kept = Vec::new();
    for m in history
        .iter()
        .rev()
        .filter(|m| m.role == Role::User && m.kind != MessageKind::Summary)
    {
        if left == 0 {
            break;
        }
        let text = m.text();
        let tokens = counter.count(&text);
        if tokens <= left {
            kept.push(m.clone());
            left -= tokens;
        } else {
            kept.push(ChatMessage::user(truncate_to(&text, left, counter)));
            left = 0;
        }
    }
    kept.reverse();
    kept
}

/// Drop the oldest item after the initial context: a tool call's results go with it, as do
/// stray results left at the front.
fn drop_oldest(request: &mut Vec<ChatMessage>, initial: usize) {
    if initial >= request.len() {
        return;
    }
    request.remove(initial);
    while request.get(initial).is_some_and(|m| m.role == Role::Tool) {
        request.remove(initial);
    }
}

impl Peer for Codex {
    fn compact(
        &mut self,
        history: &mut Vec<ChatMessage>,
        env: &Env<'_>,
    ) -> Option<Vec<SummarizerCall>> {
        if env.counter.count_messages(history) < Self::trigger_tokens(env.window) {
            return None;
        }
        let initial = leading_system(history);
        if initial == history.len() {
            return None;
        }
        // The compaction request: what the agent last sent, plus the instruction and room for
        // the answer; it must fit the window.
        let instruction = env.counter.count_message(&ChatMessage::user(INSTRUCTION));
        let mut request = history.clone();
        while request.len() > initial + 1
            && env.counter.count_messages(&request) + instruction + env.summary_tokens > env.window
        {
            drop_oldest(&mut request, initial);
        }
        let summary = summarize(&request[initial..], None, env.summary_tokens);
        let call = summary.inline_call(&request, INSTRUCTION, env.counter);
        let users = newest_user_messages(
            history,
            scaled(USER_MESSAGES_TOKENS, env.window),
            env.counter,
        );
        let mut next: Vec<ChatMessage> = history[..initial].to_vec();
        next.extend(users);
        next.push(summary_message(format!("{SUMMARY_LEAD}{}", summary.text)));
        *history = next;
        Some(vec![call])
    }
}
