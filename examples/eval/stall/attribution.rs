//! Which compaction each of an agent's compaction events belongs to.
//!
//! An agent has at most one compaction of each mode in flight — one background job, and the
//! compaction it waits for (blocking) — and every event names its mode, so one slot per mode
//! holds a compaction from its `CompactionStarted` to its `CompactionApplied`, with its
//! outcome once its `CompactionFinished` or `CompactionFailed` came. The two can overlap: a
//! background job may finish while a tool call is open and then the agent makes room at its
//! limit, so two compactions finish before the first is applied (a single slot for the next
//! outcome read that as an `CompactionApplied` with nothing finished before it). A background
//! job dropped while it still ran is applied (dropped) before its `CompactionFailed`
//! (cancelled), as the event's documentation says. Anything else is an order the eval cannot
//! attribute, reported with the agent's last events.

use std::collections::VecDeque;

use troupe::protocol::CompactionMode;

use super::{Ahead, Outcome};

/// How many of the agent's last compaction events an unattributed one is reported with.
const RECENT: usize = 12;

/// The agent's compactions in flight, by mode, and what the background road did lately.
#[derive(Debug, Default)]
pub(super) struct Attribution {
    /// Per mode (background, blocking): started and not yet applied, with its outcome once
    /// it finished or failed.
    in_flight: [Option<Option<Outcome>>; 2],
    /// A background job was dropped while it still ran: its `CompactionFailed` (cancelled)
    /// is still to come.
    cancel_due: bool,
    /// The background job since the last compaction that changed the conversation, and its
    /// outcome once applied; what it was when a blocking compaction started.
    ahead: Option<Option<Outcome>>,
    cause: Option<Ahead>,
    /// The agent's last compaction events, oldest first.
    recent: VecDeque<String>,
}

/// A compaction as its `CompactionApplied` closes it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Closed {
    pub(super) outcome: Outcome,
    /// For a blocking compaction: what had been worked ahead since the last compaction.
    pub(super) cause: Option<Ahead>,
}

fn slot(mode: CompactionMode) -> usize {
    match mode {
        CompactionMode::Background => 0,
        CompactionMode::Blocking => 1,
    }
}

impl Attribution {
    fn note(&mut self, seq: u64, event: String) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(format!("#{seq} {event}"));
    }

    /// `what`, with the events that led to it.
    fn unattributed(&self, what: String) -> String {
        let recent: Vec<&str> = self.recent.iter().map(String::as_str).collect();
        format!("{what}; the agent's last events: {}", recent.join(", "))
    }

    /// `CompactionStarted` in `mode`.
    pub(super) fn started(&mut self, seq: u64, mode: CompactionMode) -> Result<(), String> {
        self.note(seq, format!("started {mode:?}"));
        match mode {
            CompactionMode::Background => self.ahead = Some(None),
            CompactionMode::Blocking => {
                self.cause = Some(match self.ahead {
                    None => Ahead::NoJob,
                    Some(None) => Ahead::Pending,
                    Some(Some(Outcome::Unchanged)) => Ahead::Unchanged,
                    Some(Some(Outcome::Failed | Outcome::Cancelled)) => Ahead::Failed,
                    Some(Some(Outcome::Changed)) => Ahead::Dropped,
                });
            }
        }
        let at = &mut self.in_flight[slot(mode)];
        if at.is_some() {
            return Err(self.unattributed(format!(
                "CompactionStarted ({mode:?}) while one of that mode was in flight"
            )));
        }
        *at = Some(None);
        Ok(())
    }

    /// `CompactionFinished` or `CompactionFailed` in `mode`.
    pub(super) fn ended(
        &mut self,
        seq: u64,
        mode: CompactionMode,
        outcome: Outcome,
    ) -> Result<(), String> {
        self.note(seq, format!("ended {mode:?} {outcome:?}"));
        match &mut self.in_flight[slot(mode)] {
            Some(at @ None) => {
                *at = Some(outcome);
                Ok(())
            }
            None if mode == CompactionMode::Background
                && outcome == Outcome::Cancelled
                && self.cancel_due =>
            {
                self.cancel_due = false;
                Ok(())
            }
            _ => Err(self.unattributed(format!(
                "{outcome:?} ({mode:?}) with no compaction of that mode started and unfinished"
            ))),
        }
    }

    /// `CompactionApplied` in `mode`: the compaction it closes.
    pub(super) fn applied(
        &mut self,
        seq: u64,
        mode: CompactionMode,
        applied: bool,
        waited_ms: u64,
    ) -> Result<Closed, String> {
        self.note(
            seq,
            format!("applied {mode:?} (applied {applied}, waited {waited_ms} ms)"),
        );
        let outcome = match self.in_flight[slot(mode)].take() {
            Some(Some(outcome)) => outcome,
            // Dropped as stale while it ran: its cancellation is announced after.
            Some(None) if mode == CompactionMode::Background && !applied => {
                self.cancel_due = true;
                Outcome::Cancelled
            }
            _ => {
                return Err(self.unattributed(format!(
                    "CompactionApplied ({mode:?}, waited {waited_ms} ms) with no compaction of that mode finished before it"
                )));
            }
        };
        if mode == CompactionMode::Background
            && let Some(job) = self.ahead.as_mut()
        {
            *job = Some(outcome);
        }
        if outcome == Outcome::Changed && applied {
            self.ahead = None;
        }
        let cause = match mode {
            CompactionMode::Blocking => self.cause.take(),
            CompactionMode::Background => None,
        };
        Ok(Closed { outcome, cause })
    }

    /// At the end of the replay: a compaction still open, or a cancellation still due, was
    /// never closed.
    pub(super) fn finish(&self) -> Option<String> {
        let open: Vec<String> = [CompactionMode::Background, CompactionMode::Blocking]
            .into_iter()
            .filter(|&mode| self.in_flight[slot(mode)].is_some())
            .map(|mode| format!("{mode:?}"))
            .collect();
        (!open.is_empty() || self.cancel_due).then(|| {
            self.unattributed(format!(
                "the replay ended with compactions never applied ({}) or a cancellation never announced ({})",
                open.join(", "),
                self.cancel_due
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CompactionMode::{Background, Blocking};

    #[test]
    fn a_job_that_finished_before_the_room_made_at_the_limit_is_attributed_to_its_own_applied() {
        let mut a = Attribution::default();
        a.started(1, Background).unwrap();
        a.ended(2, Background, Outcome::Changed).unwrap();
        a.started(3, Blocking).unwrap();
        a.ended(4, Blocking, Outcome::Changed).unwrap();
        let blocking = a.applied(5, Blocking, true, 1).unwrap();
        assert_eq!(blocking.outcome, Outcome::Changed);
        assert_eq!(blocking.cause, Some(Ahead::Pending));
        let job = a.applied(6, Background, false, 0).unwrap();
        assert_eq!(job.outcome, Outcome::Changed);
        assert_eq!(a.finish(), None);
    }

    #[test]
    fn a_job_dropped_while_it_ran_is_cancelled_after_and_nothing_else_is_unattributed() {
        let mut a = Attribution::default();
        a.started(1, Background).unwrap();
        assert_eq!(
            a.applied(2, Background, false, 0).unwrap().outcome,
            Outcome::Cancelled
        );
        assert!(a.finish().is_some(), "its cancellation is still due");
        a.ended(3, Background, Outcome::Cancelled).unwrap();
        assert_eq!(a.finish(), None);
        let err = a.applied(4, Background, true, 0).unwrap_err();
        assert!(err.contains("no compaction of that mode finished"), "{err}");
        assert!(err.contains("#3 ended Background Cancelled"), "{err}");
        assert!(a.ended(5, Blocking, Outcome::Changed).is_err());
    }
}
