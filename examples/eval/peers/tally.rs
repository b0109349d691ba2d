//! What one strategy's life over one transcript costs and keeps: every prompt it sends billed
//! through both providers' emulated caches in one pass, the artifact recall of its context after
//! each compaction, its largest prompt, and whether every prompt kept tool calls and results
//! paired.

use troupe::compaction::economics::{Bill, CallBill, CostModel, PromptCache};
use troupe::protocol::{ChatMessage, Role};
use troupe::tokens::TokenCounter;
use troupe::tokens::prompt_cache::{CallKind, Prompt, prompt_of};
use troupe_cli::transcript_ops::{CALL_SPACING_SECS, strict_artifact_recall};

/// The cost models every prompt is billed under, in the order of [`Outcome`]'s arrays.
pub(super) const COST_MODELS: [&str; 2] = ["openai", "anthropic"];

/// Where a strategy's artifact recall was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecallAt {
    /// On the context right after each compaction, averaged.
    Compactions,
    /// The strategy never compacted: on the last prompt it sent (1.0 for a strategy that keeps
    /// every message; less for one that rewrites old ones, as masking does).
    FinalPrompt,
}

impl RecallAt {
    pub(super) fn label(self) -> &'static str {
        match self {
            RecallAt::Compactions => "compactions",
            RecallAt::FinalPrompt => "final_prompt",
        }
    }
}

/// One strategy's life over one transcript at one window.
#[derive(Debug, Clone)]
pub(super) struct Outcome {
    /// Billed-equivalent input tokens (uncached-token units), per cost model.
    pub(super) billed: [f64; 2],
    /// Of those, what the compactions' own calls cost.
    pub(super) compaction_billed: [f64; 2],
    /// Cached ÷ input tokens, per cost model.
    pub(super) cache_hit: [f64; 2],
    pub(super) compactions: usize,
    pub(super) agent_calls: usize,
    /// Strict artifact recall (`None` when nothing was at risk wherever it was measured).
    pub(super) artifact_recall: Option<f64>,
    pub(super) recall_at: RecallAt,
    pub(super) max_prompt_tokens: usize,
    /// Every prompt kept tool calls and their results paired (where the transcript itself did),
    /// and, for troupe, every compaction passed `validate`.
    pub(super) invariants_ok: bool,
}

/// Bills and measures one strategy's prompts as it sends them.
pub(super) struct Tally<'a> {
    transcript: &'a [ChatMessage],
    counter: &'a dyn TokenCounter,
    caches: [(PromptCache, Bill); 2],
    clock: f64,
    compactions: usize,
    agent_calls: usize,
    recalls: Vec<f64>,
    max_prompt_tokens: usize,
    pairing_ok: bool,
    /// The last agent prompt and how many transcript messages had been fed before it.
    last: (usize, Vec<ChatMessage>),
}

impl<'a> Tally<'a> {
    pub(super) fn new(transcript: &'a [ChatMessage], counter: &'a dyn TokenCounter) -> Self {
        Tally {
            transcript,
            counter,
            caches: [
                (PromptCache::new(CostModel::openai()), Bill::default()),
                (PromptCache::new(CostModel::anthropic()), Bill::default()),
            ],
            clock: 0.0,
            compactions: 0,
            agent_calls: 0,
            recalls: Vec::new(),
            max_prompt_tokens: 0,
            pairing_ok: true,
            last: (0, Vec::new()),
        }
    }

    /// The agent's model call made after `fed` transcript messages, with `sent` as its prompt;
    /// its answer takes `output_tokens`.
    pub(super) fn agent_call(&mut self, fed: usize, sent: Vec<ChatMessage>, output_tokens: usize) {
        let mut prompt = prompt_of(&sent, self.counter, CallKind::Agent, self.clock);
        prompt.output_tokens = output_tokens;
        self.max_prompt_tokens = self.max_prompt_tokens.max(prompt.tokens());
        // A transcript that is not paired itself (an interrupted tool call) blames no strategy.
        if self.pairing_ok && !paired(&sent) && paired(&self.transcript[..fed]) {
            self.pairing_ok = false;
        }
        self.send(&prompt);
        self.agent_calls += 1;
        self.last = (fed, sent);
    }

    /// A summarizer call of a compaction whose prompt is `messages`.
    pub(super) fn summarizer_call(&mut self, messages: &[ChatMessage], output_tokens: usize) {
        let mut prompt = prompt_of(messages, self.counter, CallKind::Compaction, self.clock);
        prompt.output_tokens = output_tokens;
        self.send(&prompt);
    }

    /// A summarizer call with a prompt of its own of `input_tokens`: billed as `troupe replay
    /// --cost` bills one (`summarizer_billed`: every input token at the uncached rate, nothing
    /// read from or written to the cache), so a troupe road that takes this form is billed as
    /// `troupe-separate` is.
    pub(super) fn own_prompt_summarizer_call(&mut self, input_tokens: usize) {
        for (cache, bill) in &mut self.caches {
            let call = CallBill {
                input_tokens,
                cached_tokens: 0,
                written_tokens: 0,
                billed: input_tokens as f64 * cache.model().rates().input,
            };
            bill.add(CallKind::Compaction, &call);
        }
        self.clock += CALL_SPACING_SECS;
    }

    /// Every call, agent's or summarizer's, is `troupe replay --cost`'s spacing after the one
    /// before (transcripts carry no timestamps; it matters only to Anthropic's 5-minute TTL).
    fn send(&mut self, prompt: &Prompt) {
        for (cache, bill) in &mut self.caches {
            let call = cache.send(prompt);
            bill.add(prompt.kind, &call);
        }
        self.clock += CALL_SPACING_SECS;
    }

    /// A compaction left `context` as the next prompt, after `fed` transcript messages: count it
    /// and measure its recall.
    pub(super) fn compacted(&mut self, fed: usize, context: &[ChatMessage]) {
        self.compactions += 1;
        if let Some(recall) = recall(&self.transcript[..fed], context) {
            self.recalls.push(recall);
        }
    }

    /// A compaction that did not pass troupe's own invariant check.
    pub(super) fn invariants_failed(&mut self) {
        self.pairing_ok = false;
    }

    pub(super) fn finish(self) -> Outcome {
        let (artifact_recall, recall_at) = if self.compactions > 0 {
            let mean = (!self.recalls.is_empty())
                .then(|| self.recalls.iter().sum::<f64>() / self.recalls.len() as f64);
            (mean, RecallAt::Compactions)
        } else {
            let (fed, sent) = &self.last;
            (
                recall(&self.transcript[..*fed], sent),
                RecallAt::FinalPrompt,
            )
        };
        let [openai, anthropic] = &self.caches;
        Outcome {
            billed: [openai.1.billed, anthropic.1.billed],
            compaction_billed: [openai.1.compaction_billed, anthropic.1.compaction_billed],
            cache_hit: [openai.1.cache_hit(), anthropic.1.cache_hit()],
            compactions: self.compactions,
            agent_calls: self.agent_calls,
            artifact_recall,
            recall_at,
            max_prompt_tokens: self.max_prompt_tokens,
            invariants_ok: self.pairing_ok,
        }
    }
}

/// Strict artifact recall (issue #28) of `context` over the transcript messages fed so far:
/// every artifact they name is at risk (nothing counts as protected — the strategies keep
/// different tails, so the same empty set is the one fair choice), kept when `context` names
/// it. `None` when nothing is at risk.
fn recall(original: &[ChatMessage], context: &[ChatMessage]) -> Option<f64> {
    let all = strict_artifact_recall(original, &[], context).overall();
    (all.total > 0).then(|| all.kept as f64 / all.total as f64)
}

/// Whether every tool result answers an open call of the assistant message its batch follows,
/// and every call is answered before the next message that is not a tool result.
pub(super) fn paired(messages: &[ChatMessage]) -> bool {
    let mut open: Vec<&str> = Vec::new();
    let mut after_assistant = false;
    for m in messages {
        if m.role == Role::Tool {
            let Some(id) = m.tool_call_id.as_deref() else {
                return false;
            };
            match open.iter().position(|c| *c == id) {
                Some(at) if after_assistant => {
                    open.swap_remove(at);
                }
                _ => return false,
            }
            continue;
        }
        if !open.is_empty() {
            return false;
        }
        after_assistant = m.role == Role::Assistant;
        open = m.calls().iter().map(|c| c.id.as_str()).collect();
    }
    open.is_empty()
}
