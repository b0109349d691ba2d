//! `openhands-masking`, the setting of "The Complexity Trap" (observation masking with
//! summarization, as OpenHands and SWE-agent run it): at every model call the tool results
//! older than the newest 10 turns are replaced by a placeholder — the prompt is rewritten at
//! every call, which is what breaks its cache — and at 80 % of the window the older half of the
//! events after the initial context (the system prompt and the task) is summarized, in a prompt
//! of its own, merging the previous summary.
//!
//! A turn is one assistant message and its results. In a transcript without tool calls (an agent
//! whose commands are plain text and whose observations come back as user messages) the
//! observations are the user messages after the task. Nothing here is scaled: 10 turns and 80 %
//! do not depend on the window.

use std::borrow::Cow;

use troupe::protocol::{ChatMessage, MessageKind, Role};

use super::live::{Env, Peer};
use super::summarizer::{SummarizerCall, leading_system, summarize, summary_message};

/// Turns whose observations are kept verbatim.
const KEEP_TURNS: usize = 10;
/// Summarize past this fraction of the window.
const TRIGGER: f64 = 0.8;

pub(super) struct OpenHandsMasking {
    /// Observations are user messages (the agent made no tool calls).
    plain_text: bool,
    /// The last summary's body (merged into the next).
    previous: Option<String>,
}

impl OpenHandsMasking {
    /// For a transcript: whether its agent writes commands as plain text.
    pub(super) fn for_transcript(transcript: &[ChatMessage]) -> Self {
        OpenHandsMasking {
            plain_text: transcript.iter().all(|m| m.calls().is_empty()),
            previous: None,
        }
    }

    pub(super) fn trigger_tokens(window: usize) -> usize {
        (window as f64 * TRIGGER) as usize
    }

    /// The initial context kept as it is: the system prompt and the first user message.
    fn head(history: &[ChatMessage]) -> usize {
        let system = leading_system(history);
        system
            + usize::from(
                history
                    .get(system)
                    .is_some_and(|m| m.role == Role::User && m.kind != MessageKind::Summary),
            )
    }

    fn is_observation(&self, m: &ChatMessage) -> bool {
        if self.plain_text {
            m.role == Role::User && m.kind != MessageKind::Summary
        } else {
            m.role == Role::Tool
        }
    }
}

/// SWE-agent's placeholder for a masked observation.
fn placeholder(text: &str) -> String {
    format!(
        "Old environment output: ({} lines omitted)",
        text.lines().count()
    )
}

impl Peer for OpenHandsMasking {
    fn present<'h>(&self, history: &'h [ChatMessage]) -> Cow<'h, [ChatMessage]> {
        // The first message of the newest KEEP_TURNS turns: observations before it are masked.
        let Some(boundary) = history
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, m)| m.role == Role::Assistant)
            .nth(KEEP_TURNS - 1)
            .map(|(i, _)| i)
        else {
            return Cow::Borrowed(history);
        };
        let head = Self::head(history);
        let mut out = history.to_vec();
        for m in out[head..boundary].iter_mut() {
            if self.is_observation(m) {
                let text = placeholder(&m.text());
                m.set_text(text);
            }
        }
        Cow::Owned(out)
    }

    fn compact(
        &mut self,
        history: &mut Vec<ChatMessage>,
        env: &Env<'_>,
    ) -> Option<Vec<SummarizerCall>> {
        let sent = self.present(history).into_owned();
        if env.counter.count_messages(&sent) < Self::trigger_tokens(env.window) {
            return None;
        }
        let head = Self::head(history);
        let start = head
            + usize::from(
                history
                    .get(head)
                    .is_some_and(|m| m.kind == MessageKind::Summary),
            );
        let events = history.len() - start;
        // The older half, moved forward past any tool results so no call loses its answer.
        let mut cut = start + events / 2;
        while history.get(cut).is_some_and(|m| m.role == Role::Tool) {
            cut += 1;
        }
        if cut <= start || cut >= history.len() {
            return None;
        }
        // The summarizer reads the events as the agent last saw them (masked).
        let summary = summarize(
            &sent[start..cut],
            self.previous.as_deref(),
            env.summary_tokens,
        );
        let call = summary.separate_call(env.counter);
        self.previous = Some(summary.text.clone());
        let mut next: Vec<ChatMessage> = history[..head].to_vec();
        next.push(summary_message(summary.text));
        next.extend_from_slice(&history[cut..]);
        *history = next;
        Some(vec![call])
    }
}
