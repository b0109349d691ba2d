//! A segment summary asked by continuing the agent's conversation, when the summarizer is the
//! agent's own model (see [`crate::summary::inline_summary`] for why and what it looks like).

use std::collections::HashMap;

use troupe_runtime::MessageId;

use super::CompactionSession;
use crate::summary::{InlineSegment, Summarizer, SummaryPrompt, inline_summary, normalize_summary};

impl CompactionSession<'_> {
    /// The structured body for `messages[s..=e]` from the summarizer's inline road, or `None`
    /// when it has none, no prefix fits its window, or its answer was unusable (the caller then
    /// sends `prompt`, the separate prompt of the same segment). The call is counted either way.
    pub(super) async fn summarize_inline(
        &mut self,
        s: usize,
        e: usize,
        prompt: &SummaryPrompt,
        focus: Option<&str>,
        summarizer: &dyn Summarizer,
    ) -> Option<String> {
        let overhead = summarizer.inline_overhead()?;
        let (first, last) = self.span_in_input(s, e)?;
        // The input as the agent sent it: what the provider holds, masks of this session aside.
        let tokens = self
            .cache
            .count_messages(self.counter, &self.before)
            .per_message;
        let room = summarizer.context_window().checked_sub(overhead)?;
        let request = inline_summary(
            InlineSegment {
                conversation: &self.before,
                tokens: &tokens,
                first,
                last,
            },
            prompt.clone(),
            focus,
            room,
            self.counter,
        )?;
        self.usage.calls += 1;
        self.usage.input_tokens += request.input_tokens + overhead;
        self.usage.inline_calls += 1;
        self.usage.inline_input_tokens += request.input_tokens + overhead;
        let answer = summarizer.summarize_inline(request).await.ok()?;
        self.usage.output_tokens += self.counter.count(&answer);
        normalize_summary(&answer)
    }

    /// Where `messages[s..=e]` lies in the input conversation: the first and last input
    /// message it is or stands for (a stub or summary made in this session stands for its
    /// originals). `None` when none of them is an input message.
    fn span_in_input(&self, s: usize, e: usize) -> Option<(usize, usize)> {
        let index: HashMap<MessageId, usize> = self
            .before
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id, i))
            .collect();
        let found: Vec<usize> = self.messages[s..=e]
            .iter()
            .flat_map(|m| match index.get(&m.id) {
                Some(&i) => vec![i],
                None => self
                    .roots
                    .get(&m.id)
                    .map(|roots| {
                        roots
                            .iter()
                            .filter_map(|id| index.get(id).copied())
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
        Some((*found.iter().min()?, *found.iter().max()?))
    }
}
