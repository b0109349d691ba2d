//! The line callers of one endpoint wait in: first come, first served, each let through when
//! the endpoint's [`Window`] has room; and the way a provider's retry loop reaches it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use troupe_protocol::trace::semconv;

use super::RateLimitStats;
use super::window::{Ticket, Window};

tokio::task_local! {
    /// The call in progress, for the limiter's line and the provider's retry loop beneath it
    /// ([`hold_endpoint`], [`before_retry`]): the retry loop is inside the provider, which
    /// knows nothing of who shares its endpoint.
    static CALL: Call;
}

/// One call (its retries included) under a limiter.
struct Call {
    limiter: Arc<Limiter>,
    met: Arc<CallMet>,
}

/// What one call met at its limiter, for its `chat` span (and so the metrics).
#[derive(Debug, Default)]
pub(super) struct CallMet {
    waited_ms: AtomicU64,
    holds: AtomicU64,
}

impl CallMet {
    /// Put what the call met on `span` (its `chat` span; a span without the fields ignores
    /// them): the wait always, 0 included, so the metrics see every limited call.
    pub(super) fn record_on(&self, span: &tracing::Span) {
        span.record(
            semconv::RATE_LIMIT_WAITED_MS,
            self.waited_ms.load(Ordering::Relaxed),
        );
        let holds = self.holds.load(Ordering::Relaxed);
        if holds > 0 {
            span.record(semconv::RATE_LIMIT_HOLDS, holds);
        }
    }
}

/// One endpoint's shared limit: every model call through it takes a turn here.
#[derive(Debug)]
pub(super) struct Limiter {
    /// Held by the first caller in line while it waits for room, so callers go in the order
    /// they came: tokio's mutex hands itself over first come, first served.
    line: tokio::sync::Mutex<()>,
    window: Mutex<Window>,
    stats: Mutex<RateLimitStats>,
    /// Told when a settlement frees room, so the first in line need not sleep out an
    /// estimate that turned out too high.
    freed: Notify,
}

impl Limiter {
    pub(super) fn new(window: Window) -> Self {
        Limiter {
            line: tokio::sync::Mutex::new(()),
            window: Mutex::new(window),
            stats: Mutex::new(RateLimitStats::default()),
            freed: Notify::new(),
        }
    }

    fn window(&self) -> MutexGuard<'_, Window> {
        // The window is consistent after every statement: a panic elsewhere leaves it usable.
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stats_mut(&self) -> MutexGuard<'_, RateLimitStats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn stats(&self) -> RateLimitStats {
        self.stats_mut().clone()
    }

    /// Wait for this caller's turn and for room for a request estimated at `tokens`; the
    /// request then counts as sent. Dropping the future leaves the line, counting nothing.
    pub(super) async fn admit(&self, tokens: u64) -> Ticket {
        let queued = Instant::now();
        // Whether it waited at all, for the line or for room: the time a free lock takes is
        // not a wait worth reporting.
        let (_turn, mut waited) = match self.line.try_lock() {
            Ok(turn) => (turn, false),
            Err(_) => (self.line.lock().await, true),
        };
        loop {
            let now = Instant::now();
            let (ready_at, freed) = {
                let mut window = self.window();
                match window.ready_at(now, tokens) {
                    None => {
                        let ticket = window.admit(now, tokens);
                        drop(window);
                        self.count_admission(waited.then(|| now - queued));
                        return ticket;
                    }
                    // Made while the window is locked: a settlement after this wakes it.
                    Some(at) => (at, self.freed.notified()),
                }
            };
            waited = true;
            // A hold that grew meanwhile is found on the next look.
            tokio::select! {
                () = tokio::time::sleep_until(ready_at) => {}
                () = freed => {}
            }
        }
    }

    fn count_admission(&self, waited: Option<Duration>) {
        let mut stats = self.stats_mut();
        stats.requests += 1;
        if let Some(waited) = waited {
            // The call's own total, its retries' turns included.
            let _ = CALL.try_with(|call| {
                call.met
                    .waited_ms
                    .fetch_add(waited.as_millis() as u64, Ordering::Relaxed)
            });
            // Inside the call's `chat` span: a slow call says why it was slow.
            tracing::info!(
                waited_ms = waited.as_millis() as u64,
                "waited for the shared rate limit"
            );
            stats.waited += 1;
            stats.longest_wait = stats.longest_wait.max(waited);
        }
    }

    /// The request `ticket` used `tokens` in the end.
    pub(super) fn settle(&self, ticket: Ticket, tokens: u64) {
        self.window().settle(ticket, tokens);
        self.freed.notify_waiters();
    }

    /// The server asked for nothing before `until`: every caller waits.
    fn hold(&self, until: Instant) {
        self.window().hold(until);
        self.stats_mut().holds += 1;
    }

    /// Run `call` (its turn in line, then a provider's call, retries and all) with this
    /// limiter reachable from the retry loop inside it; what it met is counted into `met`.
    pub(super) async fn scope<F: Future>(
        self: &Arc<Self>,
        met: &Arc<CallMet>,
        call: F,
    ) -> F::Output {
        let call_state = Call {
            limiter: Arc::clone(self),
            met: Arc::clone(met),
        };
        CALL.scope(call_state, call).await
    }
}

/// A server answered `Retry-After: after`: under a shared limit the whole endpoint waits, not
/// just the caller that heard it (everyone else would only hear the same answer). A call
/// without a limit has nobody to tell.
pub(crate) fn hold_endpoint(after: Duration) {
    // A wait past any clock (the policy's longest wait is configurable) holds nobody: the
    // call that heard it ends instead.
    let Some(until) = Instant::now().checked_add(after) else {
        return;
    };
    let _ = CALL.try_with(|call| {
        call.limiter.hold(until);
        call.met.holds.fetch_add(1, Ordering::Relaxed);
    });
}

/// The wait before a retry: the retry loop's own `wait`, then — under a shared limit — a turn
/// in line like any other request (a retry is one more request for the server to count).
pub(crate) async fn before_retry(wait: Duration) {
    tokio::time::sleep(wait).await;
    if let Ok(limiter) = CALL.try_with(|call| Arc::clone(&call.limiter)) {
        // Its tokens were reserved by the first attempt.
        limiter.admit(0).await;
    }
}
