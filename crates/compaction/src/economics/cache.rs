//! A provider's prompt cache, emulated from its documentation, and the bills it hands out.
//!
//! - **OpenAI** caches automatically: a prompt's longest prefix shared with any earlier prompt
//!   is read from the cache, counted only from 1,024 tokens and in 128-token steps. Prefixes
//!   are matched by whole blocks (messages): a changed message ends the match.
//! - **Anthropic** caches at explicit breakpoints (at most 4): the prefix up to each breakpoint
//!   is a cache entry, written at the write rate when new and read at the read rate when an
//!   entry with the same prefix was written or read within the last 300 s (a read refreshes it).
//!   A breakpoint also finds entries up to 20 blocks before it (the documented lookback), which
//!   is how an agent's tool loop hits the previous call's last mark. The longest hit is read;
//!   the rest up to the last breakpoint is written, what follows it is plain input. Prefixes
//!   under 1,024 tokens are never cached (the documented minimum).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::model::CostModel;
use troupe_tokens::prompt_cache::{CallKind, Prompt, chain};

/// The fewest tokens a cached prefix has (both providers).
pub const MIN_CACHED_TOKENS: usize = 1024;
/// OpenAI's cache hits grow in steps of this many tokens.
pub const OPENAI_CACHE_STEP: usize = 128;
/// How long an Anthropic cache entry lives after its last write or read, in seconds.
pub const ANTHROPIC_TTL_SECS: f64 = 300.0;
/// How many blocks before a breakpoint Anthropic looks for an earlier entry.
pub const ANTHROPIC_LOOKBACK_BLOCKS: usize = 20;

/// The prefix key of an empty prompt (the chain's start).
const CHAIN_START: u64 = 0x6a09_e667_f3bc_c908;

/// What one call cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CallBill {
    /// All input tokens of the prompt (cached, written and plain).
    pub input_tokens: usize,
    /// Of them, read from the cache.
    pub cached_tokens: usize,
    /// Of them, written to the cache (Anthropic only).
    pub written_tokens: usize,
    /// The price in uncached-input-token units.
    pub billed: f64,
}

/// The sum of a session's calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Bill {
    /// Calls billed.
    pub calls: usize,
    /// All input tokens sent.
    pub input_tokens: usize,
    /// Of them, read from the cache.
    pub cached_tokens: usize,
    /// Of them, written to the cache.
    pub written_tokens: usize,
    /// The price of every call, in uncached-input-token units.
    pub billed: f64,
    /// Of `billed`, what the compaction calls ([`CallKind::Compaction`]) cost.
    pub compaction_billed: f64,
}

impl Bill {
    /// Adds one call.
    pub fn add(&mut self, kind: CallKind, call: &CallBill) {
        self.calls += 1;
        self.input_tokens += call.input_tokens;
        self.cached_tokens += call.cached_tokens;
        self.written_tokens += call.written_tokens;
        self.billed += call.billed;
        if kind == CallKind::Compaction {
            self.compaction_billed += call.billed;
        }
    }

    /// The share of input tokens read from the cache (0 when nothing was sent).
    pub fn cache_hit(&self) -> f64 {
        if self.input_tokens == 0 {
            0.0
        } else {
            self.cached_tokens as f64 / self.input_tokens as f64
        }
    }
}

/// A provider's prompt cache, emulated: send it every call of a session in order.
#[derive(Debug, Clone)]
pub struct PromptCache {
    model: CostModel,
    /// OpenAI: the key of every prefix of every prompt sent (prefix-closed).
    seen: HashSet<u64>,
    /// Anthropic: the live entries, by prefix key, with the time of their last write or read.
    entries: HashMap<u64, f64>,
}

impl PromptCache {
    /// An empty cache of `model`.
    pub fn new(model: CostModel) -> Self {
        PromptCache {
            model,
            seen: HashSet::new(),
            entries: HashMap::new(),
        }
    }

    /// The cost model this cache bills with.
    pub fn model(&self) -> CostModel {
        self.model
    }

    /// Sends one call: bills it and updates the cache.
    pub fn send(&mut self, prompt: &Prompt) -> CallBill {
        let mut keys = Vec::with_capacity(prompt.blocks.len());
        let mut cumulative = Vec::with_capacity(prompt.blocks.len());
        let (mut key, mut tokens) = (CHAIN_START, 0);
        for block in &prompt.blocks {
            key = chain(key, block.key);
            tokens += block.tokens;
            keys.push(key);
            cumulative.push(tokens);
        }
        let bill = match self.model {
            CostModel::OpenAi(_) => self.send_openai(&keys, &cumulative),
            CostModel::Anthropic(_) => {
                self.send_anthropic(&keys, &cumulative, &prompt.breakpoints, prompt.at_secs)
            }
        };
        let rates = self.model.rates();
        let plain = tokens - bill.0 - bill.1;
        CallBill {
            input_tokens: tokens,
            cached_tokens: bill.0,
            written_tokens: bill.1,
            billed: plain as f64 * rates.input
                + bill.0 as f64 * rates.cached_read
                + bill.1 as f64 * rates.cache_write,
        }
    }

    /// (cached, written) of an OpenAI call.
    fn send_openai(&mut self, keys: &[u64], cumulative: &[usize]) -> (usize, usize) {
        // The seen set is prefix-closed, so the shared prefix ends at the first miss.
        let shared = keys.iter().take_while(|k| self.seen.contains(k)).count();
        let shared_tokens = shared.checked_sub(1).map_or(0, |i| cumulative[i]);
        let cached = if shared_tokens >= MIN_CACHED_TOKENS {
            shared_tokens / OPENAI_CACHE_STEP * OPENAI_CACHE_STEP
        } else {
            0
        };
        self.seen.extend(keys.iter().copied());
        (cached, 0)
    }

    /// (cached, written) of an Anthropic call.
    fn send_anthropic(
        &mut self,
        keys: &[u64],
        cumulative: &[usize],
        breakpoints: &[usize],
        at: f64,
    ) -> (usize, usize) {
        self.entries
            .retain(|_, touched| at - *touched <= ANTHROPIC_TTL_SECS);
        let marks: Vec<usize> = breakpoints
            .iter()
            .copied()
            .filter(|b| *b < keys.len())
            .take(4)
            .collect();
        let hit = marks
            .iter()
            .flat_map(|b| (b.saturating_sub(ANTHROPIC_LOOKBACK_BLOCKS - 1)..=*b).rev())
            .filter(|p| self.entries.contains_key(&keys[*p]))
            .max();
        let cached = hit.map_or(0, |p| cumulative[p]);
        if let Some(p) = hit {
            self.entries.insert(keys[p], at);
        }
        let mut written = 0;
        if let Some(last) = marks.iter().copied().max()
            && cumulative[last] >= MIN_CACHED_TOKENS
            && hit.is_none_or(|p| last > p)
        {
            written = cumulative[last] - cached;
            for mark in marks
                .iter()
                .copied()
                .filter(|m| hit.is_none_or(|p| *m > p) && cumulative[*m] >= MIN_CACHED_TOKENS)
            {
                self.entries.insert(keys[mark], at);
            }
        }
        (cached, written)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::economics::Rates;
    use troupe_tokens::prompt_cache::Block;

    /// A prompt of blocks with these tokens, keyed by `salt` and position, marks on the last
    /// block only.
    fn prompt(tokens: &[usize], salt: u64, at_secs: f64) -> Prompt {
        Prompt {
            blocks: tokens
                .iter()
                .enumerate()
                .map(|(i, t)| Block {
                    key: salt.wrapping_mul(1_000_003) ^ i as u64,
                    tokens: *t,
                })
                .collect(),
            breakpoints: tokens.len().checked_sub(1).into_iter().collect(),
            at_secs,
            kind: CallKind::Agent,
            output_tokens: 0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn openai_reads_a_shared_prefix_in_128_token_steps() {
        let mut cache = PromptCache::new(CostModel::openai());
        let first = cache.send(&prompt(&[1000, 300, 50], 1, 0.0));
        assert_eq!((first.cached_tokens, first.written_tokens), (0, 0));
        assert!(close(first.billed, 1350.0));
        // The same prefix plus a new block: 1350 shared -> 1280 cached.
        let second = cache.send(&prompt(&[1000, 300, 50, 200], 1, 10.0));
        assert_eq!(second.cached_tokens, 1280);
        assert!(close(second.billed, 1280.0 * 0.1 + 270.0));
    }

    #[test]
    fn anthropic_writes_then_reads_within_the_ttl_and_rewrites_after_it() {
        let mut cache = PromptCache::new(CostModel::anthropic());
        let p = prompt(&[1500, 500], 2, 0.0);
        let first = cache.send(&p);
        assert_eq!((first.cached_tokens, first.written_tokens), (0, 2000));
        assert!(close(first.billed, 2000.0 * 1.25));
        let again = cache.send(&Prompt {
            at_secs: 299.0,
            ..p.clone()
        });
        assert_eq!((again.cached_tokens, again.written_tokens), (2000, 0));
        assert!(close(again.billed, 200.0));
        // The read refreshed the entry: 299 + 300 is still inside.
        let refreshed = cache.send(&Prompt {
            at_secs: 599.0,
            ..p.clone()
        });
        assert_eq!(refreshed.cached_tokens, 2000);
        let expired = cache.send(&Prompt {
            at_secs: 900.0,
            ..p
        });
        assert_eq!((expired.cached_tokens, expired.written_tokens), (0, 2000));
    }

    #[test]
    fn anthropic_finds_the_previous_calls_mark_within_the_lookback() {
        let mut cache = PromptCache::new(CostModel::anthropic());
        cache.send(&prompt(&[1200, 100, 100], 3, 0.0));
        // The next call appends two blocks; its only mark is on its last block.
        let next = cache.send(&prompt(&[1200, 100, 100, 40, 60], 3, 10.0));
        assert_eq!((next.cached_tokens, next.written_tokens), (1400, 100));
        assert!(close(next.billed, 140.0 + 125.0));
    }

    #[test]
    fn a_bill_adds_calls_and_keeps_compaction_apart() {
        let mut bill = Bill::default();
        let call = CallBill {
            input_tokens: 100,
            cached_tokens: 50,
            written_tokens: 0,
            billed: 55.0,
        };
        bill.add(CallKind::Agent, &call);
        bill.add(CallKind::Compaction, &call);
        assert_eq!(
            (bill.calls, bill.input_tokens, bill.cached_tokens),
            (2, 200, 100)
        );
        assert!(close(bill.billed, 110.0) && close(bill.compaction_billed, 55.0));
        assert!(close(bill.cache_hit(), 0.5));
        assert!(close(Bill::default().cache_hit(), 0.0));
    }

    fn model(anthropic: bool) -> CostModel {
        if anthropic {
            CostModel::anthropic()
        } else {
            CostModel::openai()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A growing session with occasional rewrites: OpenAI never bills more than the
        /// uncached price, and its hits are 0 or whole steps from 1024 tokens on.
        #[test]
        fn openai_never_bills_above_uncached_and_hits_in_steps(
            blocks in proptest::collection::vec(1usize..900, 1..40),
            rewrites in proptest::collection::vec(0usize..40, 0..6),
        ) {
            let mut cache = PromptCache::new(CostModel::openai());
            for n in 1..=blocks.len() {
                let mut p = prompt(&blocks[..n], 7, n as f64 * 10.0);
                if let Some(k) = rewrites.get(n % 7).filter(|k| **k < n) {
                    p.blocks[*k].key ^= 0xdead_beef;
                }
                let bill = cache.send(&p);
                prop_assert!(bill.billed <= bill.input_tokens as f64 + 1e-9);
                prop_assert!(bill.cached_tokens <= bill.input_tokens);
                prop_assert!(bill.cached_tokens == 0
                    || (bill.cached_tokens >= MIN_CACHED_TOKENS
                        && bill.cached_tokens.is_multiple_of(OPENAI_CACHE_STEP)));
                prop_assert_eq!(bill.written_tokens, 0);
            }
        }

        /// Nothing under 1024 tokens is ever cached or written, by either provider.
        #[test]
        fn nothing_is_cached_under_1024_tokens(
            blocks in proptest::collection::vec(1usize..100, 1..10),
            anthropic in any::<bool>(),
        ) {
            prop_assume!(blocks.iter().sum::<usize>() < MIN_CACHED_TOKENS);
            let mut cache = PromptCache::new(model(anthropic));
            for round in 0..3 {
                let bill = cache.send(&prompt(&blocks, 9, round as f64));
                prop_assert_eq!((bill.cached_tokens, bill.written_tokens), (0, 0));
                prop_assert!((bill.billed - bill.input_tokens as f64).abs() < 1e-9);
            }
        }

        /// Anthropic: a new prefix costs 1.25× when written, a repeat within the TTL 0.1×, a
        /// repeat after it 1.25× again.
        #[test]
        fn anthropic_write_read_and_expiry_prices(
            blocks in proptest::collection::vec(1usize..2000, 1..12),
            gap in 0.0f64..300.0,
            late in 300.001f64..5000.0,
        ) {
            let total: usize = blocks.iter().sum();
            prop_assume!(total >= MIN_CACHED_TOKENS);
            let rates = Rates::ANTHROPIC;
            let mut cache = PromptCache::new(CostModel::anthropic());
            let first = cache.send(&prompt(&blocks, 11, 0.0));
            prop_assert_eq!(first.written_tokens, total);
            prop_assert!((first.billed - total as f64 * rates.cache_write).abs() < 1e-6);
            let read = cache.send(&prompt(&blocks, 11, gap));
            prop_assert_eq!(read.cached_tokens, total);
            prop_assert!((read.billed - total as f64 * rates.cached_read).abs() < 1e-6);
            let expired = cache.send(&prompt(&blocks, 11, gap + late));
            prop_assert_eq!((expired.cached_tokens, expired.written_tokens), (0, total));
        }

        /// A rewrite of block k invalidates every prefix past it: the next call reads at most
        /// the tokens before k from the cache.
        #[test]
        fn a_rewrite_invalidates_everything_after_it(
            blocks in proptest::collection::vec(1usize..1500, 2..30),
            k in 0usize..30,
            anthropic in any::<bool>(),
        ) {
            let k = k % blocks.len();
            let mut cache = PromptCache::new(model(anthropic));
            let mut p = prompt(&blocks, 13, 0.0);
            // Marks after every block, so Anthropic would hit anywhere a prefix survives.
            p.breakpoints = (0..blocks.len()).rev().take(4).collect::<Vec<_>>();
            p.breakpoints.sort_unstable();
            cache.send(&p);
            p.blocks[k].key ^= 0x5555;
            p.at_secs = 1.0;
            let bill = cache.send(&p);
            let before_k: usize = blocks[..k].iter().sum();
            prop_assert!(bill.cached_tokens <= before_k,
                "cached {} > {} tokens before block {}", bill.cached_tokens, before_k, k);
        }
    }
}
