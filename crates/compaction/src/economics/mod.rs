//! What compaction costs against a provider's prompt cache, and what it saves.
//!
//! Providers cache prompt prefixes: a cached input token costs about a tenth of an uncached
//! one, and a rewrite of any message makes everything after it uncached again. So a compaction
//! is worth what it saves on the calls until the next one, less what it makes the provider
//! re-read and what its summarizer costs. This module emulates the two caching schemes from
//! their documentation and puts a price on both sides:
//!
//! - A call's [`Prompt`](troupe_tokens::prompt_cache::Prompt): one block per message, keyed
//!   by a hash of its wire content, with troupe's Anthropic breakpoints (troupe-tokens'
//!   `prompt_cache`, which the Anthropic provider places them with too).
//! - [`PromptCache`]: the provider's cache under a [`CostModel`] (OpenAI's automatic prefix
//!   caching or Anthropic's explicit breakpoints, at configurable [`Rates`]); each
//!   [`PromptCache::send`] returns a [`CallBill`], a session sums them in a [`Bill`].
//! - [`receipt`]: a compaction's [`CompactionReceipt`](troupe_protocol::CompactionReceipt) —
//!   tokens before and after, the cached prefix it kept, the tokens it re-bills and its net
//!   saving over the expected turns.
//!
//! - The minimum-gain rule (`min_gain.rs`): an automatic compaction whose planned receipt
//!   nets a loss is declined before it runs, unless the window needs it by the time its answer
//!   lands ([`Lead`]).
//!
//! - [`cost_aware_target`]: how far an automatic compaction shrinks, chosen by minimising the
//!   billed input per turn ([`billed_per_turn`]) rather than fixed at 40 %.
//! - [`cheaper_summary_call`]: whether a summary continues the agent's cached prompt or is
//!   asked with a prompt of its own, chosen per compaction from the same cost model.
//!
//! Prices are in units of one uncached input token ("billed-equivalent input tokens").

mod cache;
mod lead;
pub(crate) mod min_gain;
mod model;
mod receipt;
mod summary_call;
pub(crate) mod target;

pub use cache::{
    ANTHROPIC_LOOKBACK_BLOCKS, ANTHROPIC_TTL_SECS, Bill, CallBill, MIN_CACHED_TOKENS,
    OPENAI_CACHE_STEP, PromptCache,
};
pub use lead::Lead;
pub use model::{CostModel, Rates, RatesError, UnknownCostModel};
pub use receipt::{expected_turns, receipt, summarizer_billed};
pub use summary_call::{
    SummaryCall, cheaper_summary_call, inline_call_billed, own_prompt_call_billed,
};
pub use target::{
    SummaryRoad, TargetInputs, TargetRule, billed_per_turn, cost_aware_target, target_inputs,
};
