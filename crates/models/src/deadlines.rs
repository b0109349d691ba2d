//! The two clocks of one HTTP provider attempt: the wait for the server's next sign of
//! progress (the response's head, then each streamed event), and the attempt's deadline, which
//! nothing the server sends moves. The first catches a server gone quiet, the second one that
//! keeps sending without ever finishing.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use troupe_protocol::ModelError;

/// The longest one attempt of an HTTP provider may take by default, from sending the request to
/// the answer's last byte: the timeout OpenAI's and Anthropic's own SDKs give a request.
pub(super) const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(600);

/// One attempt's clocks.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    /// The longest wait for the next sign of progress (the request timeout).
    quiet: Duration,
    /// The longest the whole attempt may take (the attempt timeout).
    total: Duration,
    /// When the attempt must be over.
    ends: Instant,
}

/// One wait for the server: until when, and the timeout it ends with.
#[derive(Debug, Clone)]
pub(super) struct Wait {
    until: Instant,
    timeout: ModelError,
}

impl Deadlines {
    /// The clocks of an attempt starting now.
    pub(super) fn start(quiet: Duration, total: Duration) -> Self {
        Deadlines {
            quiet,
            total,
            ends: after(Instant::now(), total),
        }
    }

    /// The wait for progress from `from` on: the quiet limit, or the attempt's deadline when
    /// that comes first.
    pub(super) fn wait_from(&self, from: Instant) -> Wait {
        let quiet_until = after(from, self.quiet);
        if quiet_until < self.ends {
            Wait {
                until: quiet_until,
                timeout: ModelError::Timeout(whole_seconds(self.quiet)),
            }
        } else {
            Wait {
                until: self.ends,
                timeout: ModelError::Timeout(whole_seconds(self.total)),
            }
        }
    }
}

impl Wait {
    /// `work`, if it is done by the end of this wait.
    ///
    /// # Errors
    /// The wait's [`ModelError::Timeout`] when it is not.
    pub(super) async fn run<F: Future>(&self, work: F) -> Result<F::Output, ModelError> {
        tokio::time::timeout_at(self.until, work)
            .await
            .map_err(|_| self.timeout.clone())
    }
}

/// `from + wait`, or, for a wait past any clock (a configured `Duration::MAX`), a time far
/// enough away to be never.
fn after(from: Instant, wait: Duration) -> Instant {
    const NEVER: Duration = Duration::from_secs(60 * 60 * 24 * 365 * 30);
    from.checked_add(wait)
        .or_else(|| from.checked_add(NEVER))
        .unwrap_or(from)
}

/// A timeout's seconds as errors report them: at least 1.
fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quiet_wait_never_outlasts_the_attempt() {
        let deadlines = Deadlines::start(Duration::from_secs(120), Duration::from_secs(600));
        let now = Instant::now();
        let early = deadlines.wait_from(now);
        assert_eq!(early.timeout, ModelError::Timeout(120));
        assert!(early.until <= now + Duration::from_secs(120));
        let late = deadlines.wait_from(now + Duration::from_secs(550));
        assert_eq!(late.timeout, ModelError::Timeout(600));
        assert_eq!(late.until, deadlines.ends);
        // Waits past any clock do not overflow.
        let endless = Deadlines::start(Duration::MAX, Duration::MAX);
        assert!(endless.wait_from(Instant::now()).until > now);
    }
}
