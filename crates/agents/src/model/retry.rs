//! When and how long to wait before retrying a failed provider call.
//!
//! Pure policy, no I/O: the provider decides *whether* a failure is retryable, this module says
//! *how long* to wait. Kept apart so the arithmetic is testable without a server.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Exponential backoff with jitter, bounded, honouring a server's `Retry-After`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts in all).
    pub max_retries: u32,
    /// The backoff before the first retry; it doubles on each further retry.
    pub initial_backoff: Duration,
    /// The longest backoff between two attempts (before jitter).
    pub max_backoff: Duration,
    /// The longest `Retry-After` the provider will wait for. A server that asks for longer is
    /// treated as a final answer: waiting an hour inside one model call helps nobody.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (0-based), or `None` when the server asked for a
    /// longer wait than [`RetryPolicy::max_retry_after`].
    ///
    /// With a `Retry-After` the server's value wins (it knows when its window reopens); without
    /// one the wait is `min(max_backoff, initial · 2^retry)` with "equal jitter": half fixed, half
    /// random, so parallel agents that failed together do not retry together.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if let Some(wait) = retry_after {
            return (wait <= self.max_retry_after).then_some(wait);
        }
        let factor = 2u32.saturating_pow(retry);
        let base = self
            .initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff);
        let half = base / 2;
        Some(half + half.mul_f64(random_fraction()))
    }
}

/// Parse a `Retry-After` header given in seconds (`"2"`, `"1.5"`). HTTP dates are not supported
/// (no OpenAI-compatible server sends them); they read as `None`, which means "use the backoff".
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// Parse OpenAI's `retry-after-ms` header (milliseconds, more precise than `Retry-After`).
pub(crate) fn parse_retry_after_ms(value: &str) -> Option<Duration> {
    let millis: f64 = value.trim().parse().ok()?;
    (millis.is_finite() && millis >= 0.0).then(|| Duration::from_secs_f64(millis / 1000.0))
}

/// A random number in `[0, 1)`. `RandomState` is seeded randomly per instance, which is all the
/// randomness jitter needs — no extra dependency for it.
fn random_fraction() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u8(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let policy = RetryPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            ..RetryPolicy::default()
        };
        for (retry, base_ms) in [
            (0, 100),
            (1, 200),
            (2, 400),
            (3, 800),
            (4, 1000),
            (30, 1000),
        ] {
            let d = policy.delay(retry, None).unwrap_or_default();
            let base = Duration::from_millis(base_ms);
            assert!(
                d >= base / 2 && d <= base,
                "retry {retry}: {d:?} not in [{base_ms}/2, {base_ms}]"
            );
        }
    }

    #[test]
    fn retry_after_wins_unless_too_long() {
        let policy = RetryPolicy {
            max_retry_after: Duration::from_secs(10),
            ..Default::default()
        };
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(3))),
            Some(Duration::from_secs(3))
        );
        assert_eq!(policy.delay(0, Some(Duration::from_secs(11))), None);
    }

    #[test]
    fn retry_after_parses_seconds_only() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(
            parse_retry_after_ms("250"),
            Some(Duration::from_millis(250))
        );
    }
}
