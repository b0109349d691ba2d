//! The sliding minute an endpoint's rate limit is counted over: pure arithmetic on instants,
//! no waiting, so the invariants (never more than the limit in any minute, a hold is honoured)
//! are testable without a clock.
//!
//! A sliding log, not a token bucket: a bucket that holds a minute's worth lets a burst at the
//! end of one minute and a refill's worth at the start of the next through, up to twice the
//! limit within sixty seconds — exactly what a server counting over a sliding minute answers
//! with 429.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::RateLimit;

/// The span both limits are counted over.
pub(super) const MINUTE: Duration = Duration::from_secs(60);

/// Which admission a settlement is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ticket(u64);

/// One request let through: when, and the tokens it counts for (estimated, then settled).
#[derive(Debug, Clone, Copy)]
struct Admission {
    at: Instant,
    tokens: u64,
    ticket: Ticket,
}

/// What an endpoint let through in the last minute, and until when its server asked everyone
/// to wait.
#[derive(Debug)]
pub(super) struct Window {
    limit: RateLimit,
    /// Admissions of the last minute, oldest first.
    log: VecDeque<Admission>,
    /// A server's `Retry-After`, for every caller: nothing goes before it.
    hold_until: Option<Instant>,
    next_ticket: u64,
}

impl Window {
    pub(super) fn new(limit: RateLimit) -> Self {
        Window {
            limit,
            log: VecDeque::new(),
            hold_until: None,
            next_ticket: 0,
        }
    }

    /// What a request estimated at `tokens` counts for: no more than the whole minute's
    /// allowance, so a request larger than it waits for an empty minute instead of forever.
    fn cost(&self, tokens: u64) -> u64 {
        match self.limit.tokens_per_minute {
            Some(tpm) => tokens.min(tpm.get()),
            None => tokens,
        }
    }

    /// Drop admissions older than a minute: they no longer count.
    fn forget(&mut self, now: Instant) {
        while self.log.front().is_some_and(|a| a.at + MINUTE <= now) {
            self.log.pop_front();
        }
    }

    /// When a request estimated at `tokens` may go: `None` now, else the earliest instant at
    /// which it fits both limits and any hold is over (later admissions can only push it back).
    pub(super) fn ready_at(&mut self, now: Instant, tokens: u64) -> Option<Instant> {
        self.forget(now);
        let mut at = self.hold_until.filter(|until| *until > now);
        let mut later = |candidate: Instant| {
            at = Some(at.map_or(candidate, |a| a.max(candidate)));
        };
        if let Some(rpm) = self.limit.requests_per_minute {
            let rpm = rpm.get() as usize;
            // With `len` in the minute, the one at `len - rpm` must leave for a slot to free.
            if self.log.len() >= rpm {
                later(self.log[self.log.len() - rpm].at + MINUTE);
            }
        }
        if let Some(tpm) = self.limit.tokens_per_minute {
            let cost = self.cost(tokens);
            // Saturating: settled counts are a provider's word, and may be absurd.
            let mut in_minute = self
                .log
                .iter()
                .fold(0u64, |sum, a| sum.saturating_add(a.tokens));
            // Leave, oldest first, until the rest and this request fit.
            for admission in &self.log {
                if in_minute.saturating_add(cost) <= tpm.get() {
                    break;
                }
                in_minute = in_minute.saturating_sub(admission.tokens);
                later(admission.at + MINUTE);
            }
        }
        at
    }

    /// Count a request estimated at `tokens` as sent at `now` (the caller checked
    /// [`Window::ready_at`]).
    pub(super) fn admit(&mut self, now: Instant, tokens: u64) -> Ticket {
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        let tokens = self.cost(tokens);
        self.log.push_back(Admission {
            at: now,
            tokens,
            ticket,
        });
        ticket
    }

    /// The request `ticket` used `tokens` in the end (its answer's usage); an admission the
    /// minute already forgot no longer counts either way.
    pub(super) fn settle(&mut self, ticket: Ticket, tokens: u64) {
        let cost = self.cost(tokens);
        if let Some(admission) = self.log.iter_mut().find(|a| a.ticket == ticket) {
            admission.tokens = cost;
        }
    }

    /// The server asked for nothing before `until`; a shorter ask never shortens a longer one.
    pub(super) fn hold(&mut self, until: Instant) {
        self.hold_until = Some(self.hold_until.map_or(until, |h| h.max(until)));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::num::{NonZeroU32, NonZeroU64};

    use proptest::prelude::*;

    use super::*;

    fn limit(rpm: Option<u32>, tpm: Option<u64>) -> RateLimit {
        RateLimit {
            requests_per_minute: rpm.and_then(NonZeroU32::new),
            tokens_per_minute: tpm.and_then(NonZeroU64::new),
        }
    }

    /// Let `requests` (arrival offset in seconds, estimated tokens) through in order, each at
    /// the earliest instant the window allows and never before the one before it (FIFO);
    /// the instants they went.
    fn serve(window: &mut Window, start: Instant, requests: &[(u64, u64)]) -> Vec<Instant> {
        let mut last = start;
        requests
            .iter()
            .map(|&(arrival, tokens)| {
                let mut now = last.max(start + Duration::from_secs(arrival));
                while let Some(at) = window.ready_at(now, tokens) {
                    assert!(at > now, "ready_at must move forward");
                    now = at;
                }
                window.admit(now, tokens);
                last = now;
                now
            })
            .collect()
    }

    #[test]
    fn the_request_after_the_limit_waits_for_the_oldest_to_leave_the_minute() {
        let start = Instant::now();
        let mut window = Window::new(limit(Some(2), None));
        let went = serve(&mut window, start, &[(0, 0), (10, 0), (20, 0), (30, 0)]);
        let secs: Vec<u64> = went.iter().map(|t| (*t - start).as_secs()).collect();
        assert_eq!(secs, [0, 10, 60, 70]);
    }

    #[test]
    fn tokens_are_reserved_then_settled_to_what_was_used() {
        let start = Instant::now();
        let mut window = Window::new(limit(None, Some(1_000)));
        let first = window.admit(start, 900);
        assert_eq!(
            window.ready_at(start, 200),
            Some(start + MINUTE),
            "900 reserved + 200 is over 1000"
        );
        window.settle(first, 300);
        assert_eq!(window.ready_at(start, 200), None, "300 used + 200 fits");
        // A request larger than the whole minute waits for an empty minute, not forever.
        window.admit(start, 200);
        assert_eq!(window.ready_at(start, 5_000), Some(start + MINUTE));
        assert_eq!(window.ready_at(start + MINUTE, 5_000), None);
    }

    #[test]
    fn a_hold_stops_everyone_until_it_ends_and_never_shortens() {
        let start = Instant::now();
        let mut window = Window::new(limit(Some(100), None));
        window.hold(start + Duration::from_secs(30));
        window.hold(start + Duration::from_secs(5));
        assert_eq!(
            window.ready_at(start + Duration::from_secs(1), 0),
            Some(start + Duration::from_secs(30))
        );
        assert_eq!(window.ready_at(start + Duration::from_secs(30), 0), None);
    }

    proptest! {
        /// Whatever arrives, in whatever sizes: no sixty seconds ever see more than the
        /// request limit or (counting each request at most the whole allowance) the token
        /// limit, and requests go in the order they came.
        #[test]
        fn no_minute_ever_exceeds_either_limit(
            rpm in 1u32..6,
            tpm in 1u64..5_000,
            requests in proptest::collection::vec((0u64..300, 0u64..3_000), 1..60),
        ) {
            let mut requests = requests;
            requests.sort_by_key(|(arrival, _)| *arrival);
            let start = Instant::now();
            let mut window = Window::new(limit(Some(rpm), Some(tpm)));
            let went = serve(&mut window, start, &requests);
            prop_assert!(went.windows(2).all(|w| w[0] <= w[1]), "FIFO");
            for (i, first) in went.iter().enumerate() {
                let within: Vec<usize> = (i..went.len())
                    .filter(|&j| went[j] < *first + MINUTE)
                    .collect();
                prop_assert!(within.len() <= rpm as usize, "{} requests in a minute", within.len());
                let tokens: u64 = within.iter().map(|&j| requests[j].1.min(tpm)).sum();
                prop_assert!(tokens <= tpm, "{tokens} tokens in a minute over {tpm}");
            }
        }
    }
}
