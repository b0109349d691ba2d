//! Counting tokens, for every crate that measures a prompt: the [`TokenCounter`] every window
//! and target is measured with, its two implementations ([`TiktokenCounter`], exact for OpenAI's
//! encodings, and the offline [`CharEstimateCounter`]), the per-message [`TokenCache`] that
//! spares recounting, and [`prompt_cache`]: a model call as a provider's prompt cache sees it,
//! with where troupe puts Anthropic's cache breakpoints.
//!
//! Its own crate so that the providers (troupe-models: a rate limiter's estimate, Anthropic's
//! breakpoints) and compaction count with the same code without one depending on the other.

#![deny(unreachable_pub)]

mod counter;
pub mod prompt_cache;
mod token_cache;

pub use counter::{
    BpeEncoding, CharEstimateCounter, MessageOverhead, TiktokenCounter, TokenCounter,
};
pub use token_cache::{CacheStats, CachedCounter, ConversationTokens, TokenCache};

/// The output reserve when neither the settings nor the agent's `max_tokens` give one: a long
/// answer of a coding model (models rarely answer more in one call), and what the replay of a
/// transcript keeps, which knows no model. A rate limit reserves it for a request without
/// `max_tokens` too (one number for both, so it lives here, below both).
pub const DEFAULT_OUTPUT_RESERVE: usize = 4_096;
