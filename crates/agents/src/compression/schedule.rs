//! The compression agent's queue: which job runs next.
//!
//! - The most urgent job first: an emergency compaction (a provider refused the agent's call),
//!   then a scope summary (one short call its agent waits on), then the compaction with the
//!   least room left to its hard limit (the context window less the conversation's tokens);
//!   ties go in arrival order.
//! - A newer compaction of an agent whose older one is still queued takes its place (the older
//!   one is answered "superseded"); one that is running is never touched.
//! - A queued compaction whose agent now waits for it is ranked by the room the agent has left
//!   now (`hurry`), not by the room it had when it worked ahead.
//! - Never two jobs of one agent at once: a job waits while its agent's job runs, and the next
//!   job of another agent goes ahead of it.

use std::collections::HashSet;

use troupe_protocol::CompactTrigger;

/// How urgent a job is: the smaller, the sooner it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Urgency {
    class: Class,
    /// Tokens left before the hard limit (negative: over it).
    room: i64,
}

/// The classes, most urgent first (the derived order is the declaration order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// The agent's call was refused as too long: it is stopped until this lands.
    Emergency,
    /// A scope summary: one short call the agent waits on.
    Scope,
    /// Every other compaction, by room left.
    Compaction,
}

impl Urgency {
    /// A compaction's urgency: an emergency outranks everything; others go by `room`, the
    /// tokens left to the hard limit.
    pub(crate) fn compaction(trigger: CompactTrigger, room: i64) -> Self {
        let class = match trigger {
            CompactTrigger::Emergency => Class::Emergency,
            _ => Class::Compaction,
        };
        Urgency { class, room }
    }

    /// As urgent as this, or as a compaction with `room` left when that is less.
    fn closer(self, room: i64) -> Self {
        Urgency {
            room: self.room.min(room),
            ..self
        }
    }

    /// A scope summary's urgency.
    pub(crate) fn scope() -> Self {
        Urgency {
            class: Class::Scope,
            room: 0,
        }
    }
}

/// Jobs waiting, and the agents whose job is running.
pub(crate) struct Schedule<J> {
    queued: Vec<Queued<J>>,
    running: HashSet<String>,
    arrivals: u64,
}

struct Queued<J> {
    agent: String,
    urgency: Urgency,
    /// Arrival order, the tie-break.
    arrival: u64,
    /// A compaction: a newer one of the same agent replaces it while it waits.
    replaceable: bool,
    job: J,
}

impl<J> Default for Schedule<J> {
    fn default() -> Self {
        Schedule {
            queued: Vec::new(),
            running: HashSet::new(),
            arrivals: 0,
        }
    }
}

impl<J> Schedule<J> {
    /// Take out `agent`'s queued replaceable job (its compaction), if one waits: the caller
    /// answers it "superseded" and queues the newer one instead.
    pub(crate) fn take_replaceable(&mut self, agent: &str) -> Option<J> {
        let index = self
            .queued
            .iter()
            .position(|q| q.replaceable && q.agent == agent)?;
        Some(self.queued.remove(index).job)
    }

    /// Rank `agent`'s queued replaceable job (its compaction) as one with `room` left, when
    /// that is less than it had; `false` when none is queued.
    pub(crate) fn hurry(&mut self, agent: &str, room: i64) -> bool {
        let Some(queued) = self
            .queued
            .iter_mut()
            .find(|q| q.replaceable && q.agent == agent)
        else {
            return false;
        };
        queued.urgency = queued.urgency.closer(room);
        true
    }

    /// Queue `job` of `agent`.
    pub(crate) fn push(&mut self, agent: String, urgency: Urgency, replaceable: bool, job: J) {
        self.arrivals += 1;
        self.queued.push(Queued {
            agent,
            urgency,
            arrival: self.arrivals,
            replaceable,
            job,
        });
    }

    /// The most urgent job whose agent has none running, marked running; `None` when every
    /// queued job's agent is busy or nothing is queued.
    pub(crate) fn start_next(&mut self) -> Option<(String, J)> {
        let index = self
            .queued
            .iter()
            .enumerate()
            .filter(|(_, q)| !self.running.contains(&q.agent))
            .min_by_key(|(_, q)| (q.urgency, q.arrival))
            .map(|(i, _)| i)?;
        let next = self.queued.remove(index);
        self.running.insert(next.agent.clone());
        Some((next.agent, next.job))
    }

    /// `agent`'s job has ended (answered, failed or panicked).
    pub(crate) fn finish(&mut self, agent: &str) {
        self.running.remove(agent);
    }

    /// How many jobs are running.
    pub(crate) fn running(&self) -> usize {
        self.running.len()
    }

    /// Take out every queued job (the compression agent stops).
    pub(crate) fn drain(&mut self) -> Vec<J> {
        self.queued.drain(..).map(|q| q.job).collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn automatic(room: i64) -> Urgency {
        Urgency::compaction(CompactTrigger::Automatic, room)
    }

    #[test]
    fn the_least_room_goes_first_after_emergencies_and_scope_summaries() {
        let mut schedule = Schedule::default();
        schedule.push("roomy".into(), automatic(9_000), true, "roomy");
        schedule.push("tight".into(), automatic(500), true, "tight");
        schedule.push("over".into(), automatic(-20), true, "over");
        schedule.push("scope".into(), Urgency::scope(), false, "scope");
        let emergency = Urgency::compaction(CompactTrigger::Emergency, 4_000);
        schedule.push("refused".into(), emergency, true, "refused");
        let order: Vec<_> = std::iter::from_fn(|| {
            let (agent, job) = schedule.start_next()?;
            schedule.finish(&agent);
            Some(job)
        })
        .collect();
        assert_eq!(order, ["refused", "scope", "over", "tight", "roomy"]);
    }

    #[test]
    fn equal_urgency_goes_in_arrival_order() {
        let mut schedule = Schedule::default();
        schedule.push("a".into(), automatic(10), true, 1);
        schedule.push("b".into(), automatic(10), true, 2);
        assert_eq!(schedule.start_next().unwrap().1, 1);
        assert_eq!(schedule.start_next().unwrap().1, 2);
    }

    #[test]
    fn a_job_waits_while_its_agent_runs_and_others_go_ahead() {
        let mut schedule = Schedule::default();
        schedule.push("a".into(), automatic(100), true, "a1");
        assert_eq!(schedule.start_next().unwrap().1, "a1");
        schedule.push("a".into(), automatic(1), true, "a2");
        schedule.push("b".into(), automatic(50), true, "b1");
        assert_eq!(schedule.start_next().unwrap().1, "b1");
        assert!(schedule.start_next().is_none(), "a is still running");
        assert_eq!(schedule.running(), 2);
        schedule.finish("a");
        assert_eq!(schedule.start_next().unwrap().1, "a2");
    }

    #[test]
    fn a_hurried_compaction_is_ranked_by_its_room_now() {
        let mut schedule = Schedule::default();
        schedule.push("ahead".into(), automatic(3_000), true, "ahead");
        schedule.push("blocked".into(), automatic(800), true, "blocked");
        // The agent that worked ahead now waits with less room than the other: it goes first.
        assert!(schedule.hurry("ahead", 100));
        // Never made less urgent.
        assert!(schedule.hurry("ahead", 5_000));
        assert!(!schedule.hurry("nobody", 0));
        assert_eq!(schedule.start_next().unwrap().1, "ahead");
        assert_eq!(schedule.start_next().unwrap().1, "blocked");
    }

    #[test]
    fn only_a_queued_compaction_is_replaceable() {
        let mut schedule = Schedule::default();
        schedule.push("a".into(), Urgency::scope(), false, "scope");
        assert!(schedule.take_replaceable("a").is_none());
        schedule.push("a".into(), automatic(5), true, "old");
        assert_eq!(schedule.take_replaceable("a"), Some("old"));
        // A running compaction is out of the queue: nothing to replace.
        schedule.push("b".into(), automatic(5), true, "running");
        schedule.start_next();
        schedule.start_next();
        assert!(schedule.take_replaceable("b").is_none());
    }
}
