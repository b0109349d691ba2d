//! `troupe replay --cost`: what a replayed session would have been billed for its input tokens
//! by a provider that caches prompt prefixes (`troupe_compaction::economics`).
//!
//! [`CostMeter`] watches a [`replay_transcript`](super::replay_transcript) and sends every model
//! call through an emulated [`PromptCache`]:
//! - **the agent's calls**: the live conversation before each assistant message (after any
//!   compaction there), with troupe's Anthropic breakpoints;
//! - **each compaction's summarizer calls** (as many as its report counts, each of the size the
//!   report gives): an inline call (the agent's own model summarizing) is the agent's last
//!   request plus an instruction at the end, so it rides the agent's cached prefix; any other
//!   is a prompt of its own, the summarizer's instructions and then the rendered segment, which
//!   shares no prefix with the agent's prompt. A mechanical summary (`--model none`) is billed
//!   as if a model had written it: the replay measures the strategy, not the summarizer.
//!
//! Transcripts carry no timestamps, so calls are assumed [`CALL_SPACING_SECS`] apart (it
//! matters only to Anthropic's 5-minute TTL). Every compaction also gets a receipt under the
//! chosen cost model, its summarizer priced by what the emulation billed its calls.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use troupe_compaction::ContextPolicy;
use troupe_compaction::economics::{self, Bill, CostModel, PromptCache};
use troupe_compaction::summary::segment_prompt;
use troupe_protocol::{ChatMessage, CompactionReceipt, Conversation, Role};
use troupe_tokens::TokenCounter;
use troupe_tokens::prompt_cache::{Block, CallKind, Prompt, anthropic_breakpoints, block_key};

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
        policy: &ContextPolicy,
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
        let inline_calls = usage.inline_calls.min(usage.calls);
        let inline_input = usage.inline_input_tokens.min(usage.input_tokens);
        let output = usage.output_tokens / usage.calls.max(1);
        let mut billed = 0.0;
        // Inline calls: the agent's last request (the live conversation as it stands before
        // the compaction) plus the instruction at the end — its prefix is the agent's.
        let prefix: usize = self.blocks.iter().map(|b| b.tokens).sum();
        for call in 0..inline_calls {
            let share = split(inline_input, inline_calls, call);
            let mut blocks = self.blocks.clone();
            blocks.push(Block {
                key: block_key(&ChatMessage::user(format!(
                    "inline summary instruction {}",
                    self.receipts.len()
                ))),
                tokens: share.saturating_sub(prefix),
            });
            let last = blocks.len() - 1;
            let mut breakpoints = anthropic_breakpoints(&self.live);
            breakpoints.retain(|b| *b + 1 < blocks.len());
            breakpoints.push(last);
            breakpoints.sort_unstable();
            breakpoints.dedup();
            while breakpoints.len() > 4 {
                breakpoints.remove(0);
            }
            let prompt = Prompt {
                blocks,
                breakpoints,
                at_secs: self.clock,
                kind: CallKind::Compaction,
                output_tokens: output,
            };
            billed += self.send(&prompt);
            self.compaction_calls += 1;
        }
        // Every other call: a prompt of its own.
        let (calls, input) = (
            usage.calls - inline_calls,
            usage.input_tokens - inline_input,
        );
        for call in 0..calls {
            let share = split(input, calls, call);
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
                output_tokens: output,
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
            row.receipt = Some(receipt.clone());
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
            // A fold from +0: an empty f64 sum is -0, which JSON would show.
            net_saving: self.receipts.iter().fold(0.0, |sum, r| sum + r.net_saving),
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

/// Call `call`'s share of `total` tokens over `calls` calls (the last one takes the remainder).
fn split(total: usize, calls: usize, call: usize) -> usize {
    total / calls + if call + 1 == calls { total % calls } else { 0 }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use troupe_compaction::{Archive, Compaction};
    use troupe_protocol::{CompactTrigger, CompactionReport};
    use troupe_protocol::{SummarizerUsage, TierCounts};
    use troupe_tokens::CharEstimateCounter;

    use super::*;
    use crate::transcript_ops::ReplayRow;

    /// The bill of one compaction whose summarizer used `usage`, after two agent calls.
    fn compaction_billed(usage: SummarizerUsage) -> f64 {
        let input = vec![
            ChatMessage::system("You are a careful coding agent. ".repeat(200)),
            ChatMessage::user("Fix the parser bug."),
            ChatMessage::assistant("Looking."),
            ChatMessage::user("Go on."),
            ChatMessage::assistant("Reading more."),
            ChatMessage::user("And?"),
            ChatMessage::assistant("Done."),
        ];
        let counter = CharEstimateCounter;
        let policy = ContextPolicy::for_window(32_000);
        let mut inner = ();
        let mut meter = CostMeter::new(&input, &policy, &counter, CostModel::openai(), &mut inner);
        for fed in 1..=6 {
            meter.on_message(fed);
        }
        let before = Conversation::from_messages(input[..6].iter().cloned());
        let compaction = Compaction {
            messages: input[..2].to_vec(),
            archive: Archive::default(),
            report: CompactionReport {
                summarizer: usage,
                ..CompactionReport::default()
            },
        };
        let row = ReplayRow {
            at_message: 6,
            tokens_before: 0,
            tokens_after: 0,
            tiers: TierCounts::default(),
            summarizer_calls: usage.calls,
            ms: 0.0,
            invariants_ok: true,
            reached: true,
            trigger: CompactTrigger::Automatic,
            reason: String::new(),
            receipt: None,
        };
        meter.on_compaction(&ReplayedCompaction {
            row: &row,
            before: &before,
            compaction: &compaction,
        });
        let mut report = ReplayReport {
            compactions: vec![row],
            ..ReplayReport::default()
        };
        meter.finish(&mut report);
        let cost = report.cost.unwrap();
        assert_eq!(cost.agent_calls, 2);
        assert_eq!(cost.compaction_calls, usage.calls);
        let receipt = report.compactions[0].receipt.clone().unwrap();
        assert!((receipt.summarizer_billed - cost.compaction_billed).abs() < 1e-9);
        cost.compaction_billed
    }

    #[test]
    fn an_inline_summary_call_rides_the_agents_cached_prompt() {
        let usage = SummarizerUsage {
            calls: 1,
            input_tokens: 1_700,
            output_tokens: 200,
            ..SummarizerUsage::default()
        };
        let separate = compaction_billed(usage);
        assert!(
            (separate - 1_700.0).abs() < 1e-9,
            "a prompt of its own: {separate}"
        );
        let inline = compaction_billed(SummarizerUsage {
            inline_calls: 1,
            inline_input_tokens: 1_700,
            ..usage
        });
        assert!(
            inline < separate / 2.0,
            "inline {inline} vs separate {separate}"
        );
    }
}
