//! Counting tokens: the [`TokenCounter`] every budget is measured with, its two
//! implementations ([`TiktokenCounter`], exact for OpenAI's encodings, and the offline
//! [`CharEstimateCounter`]), and the per-message [`TokenCache`] that spares recounting.

pub use crate::counter::{
    BpeEncoding, CharEstimateCounter, MessageOverhead, TiktokenCounter, TokenCounter,
};
pub use crate::token_cache::{CacheStats, CachedCounter, ConversationTokens, TokenCache};
