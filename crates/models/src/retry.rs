//! When and how long to wait before retrying a failed provider call.
//!
//! Pure policy, no I/O: the provider decides *whether* a failure is retryable, this module says
//! *how long* to wait. Kept apart so the arithmetic is testable without a server.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use troupe_protocol::ModelError;

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
        self.wait(retry, retry_after.map(RetryAfter::Wait)).ok()
    }

    /// [`RetryPolicy::delay`] for a `Retry-After` as the server sent it: a wait this policy
    /// cannot honour — longer than [`RetryPolicy::max_retry_after`], or no wait at all — is
    /// refused, saying why.
    pub(crate) fn wait(
        &self,
        retry: u32,
        retry_after: Option<RetryAfter>,
    ) -> Result<Duration, WaitRefused> {
        match retry_after {
            Some(RetryAfter::Wait(wait)) if wait <= self.max_retry_after => Ok(wait),
            Some(RetryAfter::Wait(wait)) => Err(WaitRefused::TooLong {
                asked: wait,
                max: self.max_retry_after,
            }),
            Some(RetryAfter::Unusable(seconds)) => Err(WaitRefused::NoWait(seconds)),
            None => {
                let factor = 2u32.saturating_pow(retry);
                let base = self
                    .initial_backoff
                    .saturating_mul(factor)
                    .min(self.max_backoff);
                let half = base / 2;
                Ok(half + half.mul_f64(random_fraction()))
            }
        }
    }
}

/// A server's `Retry-After`, read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum RetryAfter {
    /// Wait this long.
    Wait(Duration),
    /// Seconds that are no wait: negative, not a number, infinite, or more than a [`Duration`]
    /// holds (`1e20`). Kept, so the refusal can say what the server asked.
    Unusable(f64),
}

/// Why the policy will not wait as the server asked: the call ends with the server's error,
/// this added to it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum WaitRefused {
    /// Longer than [`RetryPolicy::max_retry_after`].
    #[error("the server asked to wait {asked:?}, longer than the {max:?} the retry policy waits")]
    TooLong {
        /// What the server asked.
        asked: Duration,
        /// The policy's longest wait.
        max: Duration,
    },
    /// A number no clock can wait.
    #[error("the server asked to wait {0} s, which is no wait")]
    NoWait(f64),
}

impl WaitRefused {
    /// `error` (the failure whose answer asked for the wait) saying why it is final.
    pub(crate) fn explain(&self, error: ModelError) -> ModelError {
        match error {
            ModelError::RateLimited(message) => {
                ModelError::RateLimited(format!("{message} ({self})"))
            }
            ModelError::Server { status, message } => ModelError::Server {
                status,
                message: format!("{message} ({self})"),
            },
            other => other,
        }
    }
}

/// Parse a `Retry-After` header given in seconds (`"2"`, `"1.5"`). HTTP dates are not supported
/// (no OpenAI-compatible server sends them); they read as `None`, which means "use the backoff".
/// A number that is no wait is [`RetryAfter::Unusable`]: checked, never converted blindly
/// (`Duration::from_secs_f64` panics on it).
pub(crate) fn parse_retry_after(value: &str) -> Option<RetryAfter> {
    let seconds: f64 = value.trim().parse().ok()?;
    Some(after_seconds(seconds))
}

/// Parse OpenAI's `retry-after-ms` header (milliseconds, more precise than `Retry-After`).
pub(crate) fn parse_retry_after_ms(value: &str) -> Option<RetryAfter> {
    let millis: f64 = value.trim().parse().ok()?;
    Some(after_seconds(millis / 1000.0))
}

fn after_seconds(seconds: f64) -> RetryAfter {
    Duration::try_from_secs_f64(seconds).map_or(RetryAfter::Unusable(seconds), RetryAfter::Wait)
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
        let wait = |d| Some(RetryAfter::Wait(d));
        assert_eq!(parse_retry_after("2"), wait(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), wait(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(
            parse_retry_after_ms("250"),
            wait(Duration::from_millis(250))
        );
    }

    /// Every number a server may send is read without a panic: one no clock can wait
    /// (negative, not a number, infinite, past what a `Duration` holds) is refused as no wait,
    /// one that is a wait but too long is refused as too long — neither is retried.
    #[test]
    fn a_wait_no_policy_can_honour_is_refused_not_a_panic() {
        let policy = RetryPolicy::default();
        let no_waits = [
            "-1",
            "-0.001",
            "NaN",
            "inf",
            "-inf",
            "1e20",
            "1e400",
            "18446744073709551616",
        ];
        for value in no_waits {
            let after = parse_retry_after(value);
            assert!(
                matches!(after, Some(RetryAfter::Unusable(_))),
                "{value}: {after:?}"
            );
            let refused = policy.wait(0, after);
            assert!(
                matches!(refused, Err(WaitRefused::NoWait(_))),
                "{value}: {refused:?}"
            );
        }
        let huge_ms = parse_retry_after_ms("1e30");
        assert!(
            matches!(huge_ms, Some(RetryAfter::Unusable(_))),
            "{huge_ms:?}"
        );
        let long = parse_retry_after("1e10");
        assert!(
            matches!(policy.wait(0, long), Err(WaitRefused::TooLong { .. })),
            "{long:?}"
        );
        let explained =
            WaitRefused::NoWait(f64::NAN).explain(ModelError::RateLimited("slow down".into()));
        assert_eq!(
            explained,
            ModelError::RateLimited(
                "slow down (the server asked to wait NaN s, which is no wait)".into()
            )
        );
    }
}
