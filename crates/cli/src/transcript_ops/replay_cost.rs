//! `troupe replay --cost`: what a replayed session would have been billed for its input tokens
//! by a provider that caches prompt prefixes (`troupe_compaction::economics`).
//!
//! [`CostMeter`] watches a [`replay_transcript`](super::replay_transcript) and sends every model
//! call through an emulated [`PromptCache`]:
//! - **the agent's calls**: the live conversation before each assistant message (after any
//!   compaction there), with troupe's Anthropic breakpoints;
//! - **each compaction's summarizer calls** (as many as its report counts, each of the size the
//!   report gives): a prompt of their own, the summarizer's instructions and then the rendered
//!   segment, which shares no prefix with the agent's prompt.
//!
//! Transcripts carry no timestamps, so calls are assumed [`CALL_SPACING_SECS`] apart (it
//! matters only to Anthropic's 5-minute TTL). Every compaction also gets a receipt under the
//! chosen cost model, its summarizer priced by what the emulation billed its calls.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use troupe_compaction::BudgetPolicy;
use troupe_compaction::economics::{
    self, Bill, Block, CallKind, CostModel, Prompt, PromptCache, anthropic_breakpoints, block_key,
};
use troupe_compaction::summary::segment_prompt;
use troupe_compaction::tokens::TokenCounter;
use troupe_runtime::{ChatMessage, CompactionReceipt, Conversation, Role};

use super::replay::{ReplayObserver, ReplayReport, ReplayedCompaction, SkippedTrigger, job_policy};

/// Seconds between two model calls of a replay (a transcript has no timestamps): about an
/// agent's pace with tool calls in between.
pub const CALL_SPACING_SECS: f64 = 10.0;

/// A replay's bill under one cost model (`ReplayReport::cost`). Prices are in units of one
/// uncached input token.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayCost {
    /// `openai` or `anthropic`.
    pub model: String,
    /// The price of an uncached input token (1 unless overridden).
    pub input_rate: f64,
    /// The price of a cached input token.
    pub cached_rate: f64,
    /// The price of a token written to the cache (Anthropic).
    pub write_rate: f64,
    /// The seconds assumed between two calls.
    pub call_spacing_secs: f64,
    /// The agent's model calls billed.
    pub agent_calls: usize,
    /// The compactions' summarizer calls billed.
    pub compaction_calls: usize,
    /// Input tokens of all calls.
    pub input_tokens: usize,
    /// Of them, read from the cache.
    pub cached_tokens: usize,
    /// Of them, written to the cache.
    pub written_tokens: usize,
    /// What all calls' input was billed: billed-equivalent input tokens.
    pub billed: f64,
    /// What the same input would cost with no cache (`input_tokens` × the input rate).
    pub uncached: f64,
    /// `cached_tokens / input_tokens`.
    pub cache_hit: f64,
    /// Of `billed`, the compactions' summarizer calls.
    pub compaction_billed: f64,
    /// The tokens the compactions made the next call re-read (the sum of their receipts).
    pub rebilled_tokens: usize,
    /// The sum of the compactions' net savings (their receipts).
    pub net_saving: f64,
}

/// Watches a replay and bills its model calls (see the module documentation); passes every
/// event on to `inner`. [`CostMeter::finish`] puts the bill and the receipts in the report.
pub struct CostMeter<'a> {
    input: &'a [ChatMessage],
    counter: &'a dyn TokenCounter,
    model: CostModel,
    /// The trigger the replay's compactions work against (the expected turns are counted to it).
    trigger_tokens: usize,
    /// The summarizer's instructions, the first block of each of its calls.
    instruction: Block,
    cache: PromptCache,
    bill: Bill,
    agent_calls: usize,
    compaction_calls: usize,
    /// The live conversation as blocks, in step with the replay's.
    live: Vec<ChatMessage>,
    blocks: Vec<Block>,
    /// Tokens by block key: a message is counted once however many calls send it.
    tokens_of: HashMap<u64, usize>,
    clock: f64,
    receipts: Vec<CompactionReceipt>,
    inner: &'a mut dyn ReplayObserver,
}

impl<'a> CostMeter<'a> {
    /// A meter for replaying `input` under `policy` (as passed to `replay_transcript`), billing
    /// with `model`; `counter` should be the replay's.
    pub fn new(
        input: &'a [ChatMessage],
        policy: &BudgetPolicy,
        counter: &'a dyn TokenCounter,
        model: CostModel,
        inner: &'a mut dyn ReplayObserver,
    ) -> Self {
        let instruction =
            ChatMessage::system(segment_prompt("", None, None, policy.summary_max_tokens).system);
        CostMeter {
            input,
            counter,
            model,
            trigger_tokens: job_policy(policy).0.trigger_tokens(),
            instruction: Block {
                key: block_key(&instruction),
                tokens: counter.count_message(&instruction),
            },
            cache: PromptCache::new(model),
            bill: Bill::default(),
            agent_calls: 0,
            compaction_calls: 0,
            live: Vec::new(),
            blocks: Vec::new(),
            tokens_of: HashMap::new(),
            clock: 0.0,
            receipts: Vec::new(),
            inner,
        }
    }

    fn block(&mut self, message: &ChatMessage) -> Block {
        let key = block_key(message);
        let counter = self.counter;
        let tokens = *self
            .tokens_of
            .entry(key)
            .or_insert_with(|| counter.count_message(message));
        Block { key, tokens }
    }

    fn send(&mut self, prompt: &Prompt) -> f64 {
        let bill = self.cache.send(prompt);
        self.bill.add(prompt.kind, &bill);
        self.clock += CALL_SPACING_SECS;
        bill.billed
    }

    /// The summarizer calls of a compaction: what the emulation billed them.
    fn bill_summarizer(&mut self, event: &ReplayedCompaction<'_>) -> f64 {
        let usage = event.compaction.report.summarizer;
        let mut billed = 0.0;
        for call in 0..usage.calls {
            // Each call gets its share of the reported tokens (the last one the remainder).
            let share = usage.input_tokens / usage.calls
                + if call + 1 == usage.calls {
                    usage.input_tokens % usage.calls
                } else {
                    0
                };
            let instruction = Block {
                tokens: self.instruction.tokens.min(share),
                ..self.instruction
            };
            // The segment: keyed by the compaction and the call, a text no agent prompt holds.
            let segment = Block {
                key: block_key(&ChatMessage::user(format!(
                    "segment {} call {call}",
                    self.receipts.len()
                ))),
                tokens: share - instruction.tokens,
            };
            let prompt = Prompt {
                blocks: vec![instruction, segment],
                breakpoints: vec![0, 1],
                at_secs: self.clock,
                kind: CallKind::Compaction,
                output_tokens: usage.output_tokens / usage.calls,
            };
            billed += self.send(&prompt);
            self.compaction_calls += 1;
        }
        billed
    }

    /// Put the bill in `report.cost` and each compaction's receipt in its row.
    pub fn finish(self, report: &mut ReplayReport) {
        let rates = self.model.rates();
        for (row, receipt) in report.compactions.iter_mut().zip(&self.receipts) {
            row.receipt = Some(*receipt);
        }
        report.cost = Some(ReplayCost {
            model: self.model.name().to_string(),
            input_rate: rates.input,
            cached_rate: rates.cached_read,
            write_rate: rates.cache_write,
            call_spacing_secs: CALL_SPACING_SECS,
            agent_calls: self.agent_calls,
            compaction_calls: self.compaction_calls,
            input_tokens: self.bill.input_tokens,
            cached_tokens: self.bill.cached_tokens,
            written_tokens: self.bill.written_tokens,
            billed: self.bill.billed,
            uncached: self.bill.input_tokens as f64 * rates.input,
            cache_hit: self.bill.cache_hit(),
            compaction_billed: self.bill.compaction_billed,
            rebilled_tokens: self.receipts.iter().map(|r| r.rebilled_tokens).sum(),
            net_saving: self.receipts.iter().map(|r| r.net_saving).sum(),
        });
    }
}

impl ReplayObserver for CostMeter<'_> {
    fn on_message(&mut self, fed: usize) {
        if let Some(message) = fed.checked_sub(1).and_then(|i| self.input.get(i)) {
            // The replay compacted (if due) after the previous message; the call that wrote
            // this assistant message is sent now, before the message joins the conversation.
            if message.role == Role::Assistant && !self.live.is_empty() {
                let prompt = Prompt {
                    blocks: self.blocks.clone(),
                    breakpoints: anthropic_breakpoints(&self.live),
                    at_secs: self.clock,
                    kind: CallKind::Agent,
                    output_tokens: self.counter.count_message(message),
                };
                self.send(&prompt);
                self.agent_calls += 1;
            }
            let block = self.block(message);
            self.blocks.push(block);
            self.live.push(message.clone());
        }
        self.inner.on_message(fed);
    }

    fn on_compaction(&mut self, event: &ReplayedCompaction<'_>) {
        let summarizer_billed = self.bill_summarizer(event);
        let before = event.before.messages();
        let turns = economics::expected_turns(
            before,
            self.counter,
            self.trigger_tokens,
            event.compaction.report.tokens_after,
        );
        let receipt = economics::receipt(
            before,
            &event.compaction.messages,
            self.counter,
            &self.model,
            summarizer_billed,
            turns,
        );
        self.receipts.push(receipt);
        let live = event.compaction.messages.clone();
        self.blocks = live.iter().map(|m| self.block(m)).collect();
        self.live = live;
        self.inner.on_compaction(event);
    }

    fn on_skip(&mut self, event: &SkippedTrigger<'_>) {
        self.inner.on_skip(event);
    }

    fn on_finish(&mut self, conversation: &Conversation) {
        self.inner.on_finish(conversation);
    }
}
