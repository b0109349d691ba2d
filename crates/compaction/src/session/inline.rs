//! A segment summary asked by continuing the agent's conversation, when the summarizer is the
//! agent's own model (see [`crate::summary::inline_summary`] for why and what it looks like).

use super::CompactionSession;
use crate::economics::{CostModel, SummaryCall, cheaper_summary_call};
use crate::summary::{
    InlineSegment, InlineSummary, Summarizer, SummaryPrompt, inline_summary, normalize_summary,
};

impl CompactionSession<'_> {
    /// The structured body for `messages[s..=e]` from the summarizer's inline road, or `None`
    /// when it has none, no prefix fits its window, the separate prompt bills less under the
    /// policy's pricing (OpenAI's rates when unknown; [`cheaper_summary_call`]: a small segment
    /// beside a long conversation), or its answer was unusable. The caller then sends `prompt`,
    /// the separate prompt of the same segment. A call sent is counted either way.
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
        if self.own_prompt_bills_less(&request, overhead, prompt, summarizer) {
            return None;
        }
        self.usage.calls += 1;
        self.usage.input_tokens += request.input_tokens + overhead;
        self.usage.inline_calls += 1;
        self.usage.inline_input_tokens += request.input_tokens + overhead;
        let answer = summarizer.summarize_inline(request).await.ok()?;
        self.usage.output_tokens += self.counter.count(&answer);
        normalize_summary(&answer)
    }

    /// Whether `prompt`, sent on its own, bills less than `request` (the agent's prompt, read
    /// cached, and the instruction), and fits the summarizer in one call — a prompt folded
    /// over chunks takes several calls and never does.
    fn own_prompt_bills_less(
        &self,
        request: &InlineSummary,
        overhead: usize,
        prompt: &SummaryPrompt,
        summarizer: &dyn Summarizer,
    ) -> bool {
        let whole = prompt.request_tokens(self.counter);
        if whole > summarizer.context_window() {
            return false;
        }
        let instruction = request
            .messages
            .last()
            .map_or(0, |m| self.counter.count_message(m));
        let agent_prompt = (request.input_tokens + overhead).saturating_sub(instruction);
        let own = whole.saturating_sub(prompt.max_output_tokens);
        let pricing = self.policy.pricing.unwrap_or_else(CostModel::openai);
        cheaper_summary_call(&pricing, agent_prompt, instruction, own) == SummaryCall::OwnPrompt
    }

    /// Where `messages[s..=e]` lies in the input conversation: the first and last input
    /// message it is or stands for (a stub or summary made in this session stands for its
    /// originals). `None` when none of them is an input message.
    fn span_in_input(&self, s: usize, e: usize) -> Option<(usize, usize)> {
        let index = &self.before_index;
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
