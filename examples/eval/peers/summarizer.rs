//! The one summarizer every strategy uses — troupe's mechanical summarizer, the `--model none`
//! road — and the two shapes a summarizer call can take, so that strategies differ only in
//! when they compact, what they keep and what their summarizer call shares with the cache.

use troupe::compaction::invariants::{tool_call_owners, tool_name};
use troupe::compaction::summary::{
    MechanicalSummarizer, Summarizer, SummaryPrompt, render_message, segment_prompt,
};
use troupe::protocol::{ChatMessage, MessageKind};
use troupe::tokens::TokenCounter;

/// The window the field's documented defaults assume (Claude's 200k): absolute token figures
/// from their documentation are scaled by `window / 200k` (at 32k a 20k figure is 3.2k).
pub(super) const DOCUMENTED_WINDOW: usize = 200_000;

/// `tokens` of a parameter documented for a 200k window, scaled to `window`.
pub(super) fn scaled(tokens: usize, window: usize) -> usize {
    tokens * window / DOCUMENTED_WINDOW
}

/// One summarizer call a compaction made: its prompt and the tokens of its answer.
pub(super) struct SummarizerCall {
    pub(super) messages: Vec<ChatMessage>,
    pub(super) output_tokens: usize,
}

/// What the shared summarizer wrote, and the prompt it answered.
pub(super) struct Summary {
    pub(super) prompt: SummaryPrompt,
    pub(super) text: String,
}

impl Summary {
    /// The summarizer call as a prompt of its own (pi, OpenHands): the summarizer's
    /// instructions as the system message, the rendered conversation as the user message —
    /// nothing in it is the agent's cached prefix.
    pub(super) fn separate_call(&self, counter: &dyn TokenCounter) -> SummarizerCall {
        SummarizerCall {
            messages: vec![
                ChatMessage::system(self.prompt.system.clone()),
                ChatMessage::user(self.prompt.user.clone()),
            ],
            output_tokens: counter.count(&self.text),
        }
    }

    /// The summarizer call as the agent's last prompt with an instruction at the end (Claude
    /// Code, Codex): it rides the cached prefix.
    pub(super) fn inline_call(
        &self,
        sent: &[ChatMessage],
        instruction: &str,
        counter: &dyn TokenCounter,
    ) -> SummarizerCall {
        let mut messages = sent.to_vec();
        messages.push(ChatMessage::user(instruction));
        SummarizerCall {
            messages,
            output_tokens: counter.count(&self.text),
        }
    }
}

/// The summary of `messages` (merging `previous`, as an iterative update, when given) that the
/// mechanical summarizer writes in at most `max_tokens`.
pub(super) fn summarize(
    messages: &[ChatMessage],
    previous: Option<&str>,
    max_tokens: usize,
) -> Summary {
    let prompt = segment_prompt(&render(messages), previous, None, max_tokens);
    // The mechanical summarizer is pure computation and never fails; it only implements an
    // async trait.
    let text = futures::executor::block_on(MechanicalSummarizer::new().summarize(prompt.clone()))
        .unwrap_or_default();
    Summary { prompt, text }
}

/// The messages as a summarizer reads them (troupe's rendering).
fn render(messages: &[ChatMessage]) -> String {
    let owners = tool_call_owners(messages);
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| render_message(m, tool_name(messages, owners[i], i)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A summary as the conversation carries it: a user message (all four peers put it there)
/// marked as a summary, so the one breakpoint rule places a breakpoint after it.
pub(super) fn summary_message(text: String) -> ChatMessage {
    ChatMessage::user(text).with_kind(MessageKind::Summary)
}

/// The leading system messages: what every strategy keeps as its initial context.
pub(super) fn leading_system(history: &[ChatMessage]) -> usize {
    history
        .iter()
        .take_while(|m| m.role.is_instructions())
        .count()
}

/// `text` cut to about `tokens` tokens (at a character boundary, by its own token density).
pub(super) fn truncate_to(text: &str, tokens: usize, counter: &dyn TokenCounter) -> String {
    let have = counter.count(text);
    if have <= tokens {
        return text.to_string();
    }
    let chars = text.chars().count() * tokens / have.max(1);
    text.chars().take(chars).collect()
}
