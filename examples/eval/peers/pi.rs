//! `pi`, emulated from its documented compaction: when the context exceeds the window less
//! `reserveTokens` (16,384) it keeps the newest messages worth at least `keepRecentTokens`
//! (20,000), cutting only where a message starts a step (a user or an assistant message, never a
//! tool result, so no call is parted from its results), and replaces the rest with a structured
//! summary in a prompt of its own, updated iteratively (the previous summary is given to the
//! next), with the files read and modified tracked across compactions. A cut inside a user's
//! turn (at an assistant message) is pi's "split turn": the turn's prefix gets a summary of its
//! own, a second summarizer call, appended to the first.
//!
//! 16,384 and 20,000 assume a 200k window and are scaled to the window ([`scaled`]): at 32k pi
//! compacts past 29.4k and keeps the newest 3.2k.

use std::collections::BTreeSet;

use troupe::compaction::transcript::ledger_from_transcript;
use troupe::protocol::{ChatMessage, MessageKind, Role};

use super::live::{Env, Peer};
use super::summarizer::{SummarizerCall, leading_system, scaled, summarize, summary_message};

const RESERVE_TOKENS: usize = 16_384;
const KEEP_RECENT_TOKENS: usize = 20_000;

/// What pi's summary message starts with.
const SUMMARY_LEAD: &str =
    "The conversation history before this point was compacted into the following summary:\n\n";

#[derive(Default)]
pub(super) struct Pi {
    /// The last summary's body (given to the next as the one to update).
    previous: Option<String>,
    read: BTreeSet<String>,
    modified: BTreeSet<String>,
}

impl Pi {
    pub(super) fn trigger_tokens(window: usize) -> usize {
        window - scaled(RESERVE_TOKENS, window)
    }
}

/// Where pi cuts `messages` (the history after its initial context and any previous summary):
/// the latest point where a user or assistant message starts such that the messages from it on
/// are worth at least `keep` tokens; `None` when everything is within `keep`.
pub(super) fn cut_point(
    messages: &[ChatMessage],
    keep: usize,
    count: impl Fn(&ChatMessage) -> usize,
) -> Option<usize> {
    let mut kept = 0;
    for i in (0..messages.len()).rev() {
        kept += count(&messages[i]);
        if kept >= keep {
            // The nearest valid cut at or before `i`: the kept part is never smaller.
            return (0..=i)
                .rev()
                .find(|&c| messages[c].role != Role::Tool)
                .filter(|&c| c > 0);
        }
    }
    None
}

impl Peer for Pi {
    fn compact(
        &mut self,
        history: &mut Vec<ChatMessage>,
        env: &Env<'_>,
    ) -> Option<Vec<SummarizerCall>> {
        if env.counter.count_messages(history) <= Self::trigger_tokens(env.window) {
            return None;
        }
        let system = leading_system(history);
        // The previous summary stays out of the messages: it is passed as the one to update.
        let start = system
            + usize::from(
                history
                    .get(system)
                    .is_some_and(|m| m.kind == MessageKind::Summary),
            );
        let body = &history[start..];
        let cut = cut_point(body, scaled(KEEP_RECENT_TOKENS, env.window), |m| {
            env.counter.count_message(m)
        })?;
        let (old, kept) = body.split_at(cut);
        // A cut at an assistant message splits the user's turn: its prefix (from the turn's user
        // message) is summarized on its own.
        let turn_start = if kept[0].role == Role::User {
            old.len()
        } else {
            old.iter().rposition(|m| m.role == Role::User).unwrap_or(0)
        };
        let (history_part, turn_prefix) = old.split_at(turn_start);
        let ledger = ledger_from_transcript(old);
        self.read.extend(ledger.read_only_files());
        self.modified.extend(ledger.modified_files());
        self.read.retain(|p| !self.modified.contains(p));
        let mut calls = Vec::new();
        let mut text = String::new();
        if !history_part.is_empty() || self.previous.is_some() {
            let summary = summarize(history_part, self.previous.as_deref(), env.summary_tokens);
            calls.push(summary.separate_call(env.counter));
            text = summary.text;
        }
        if !turn_prefix.is_empty() {
            let summary = summarize(turn_prefix, None, env.summary_tokens);
            calls.push(summary.separate_call(env.counter));
            text = format!(
                "{text}\n\n---\n\n**Turn Context (split turn):**\n\n{}",
                summary.text
            );
        }
        self.previous = Some(text.clone());
        let files = |tag: &str, set: &BTreeSet<String>| {
            format!(
                "<{tag}>\n{}\n</{tag}>",
                set.iter().cloned().collect::<Vec<_>>().join("\n")
            )
        };
        let message = format!(
            "{SUMMARY_LEAD}<summary>\n{text}\n\n{}\n{}\n</summary>",
            files("read-files", &self.read),
            files("modified-files", &self.modified)
        );
        let mut next: Vec<ChatMessage> = history[..system].to_vec();
        next.push(summary_message(message));
        next.extend_from_slice(kept);
        *history = next;
        Some(calls)
    }
}
