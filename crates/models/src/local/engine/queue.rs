//! The worker's job queue, in two lanes: a queued interactive call (an agent's turn waits on
//! it) is served before any queued background call (the compression agent working ahead), each
//! lane in arrival order. The worker takes jobs between batches while it runs fewer than its
//! limit, so the lanes decide who starts when more wait than may run; a running job is never
//! preempted (it shares each batch with the others).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

use troupe_protocol::RequestPriority;
use troupe_protocol::sync::lock;

/// A blocking two-lane queue: many senders, one worker.
pub(crate) struct JobQueue<T> {
    lanes: Mutex<Lanes<T>>,
    ready: Condvar,
}

struct Lanes<T> {
    interactive: VecDeque<T>,
    background: VecDeque<T>,
    /// No more jobs are taken; the worker ends once the lanes are empty.
    closed: bool,
}

impl<T> JobQueue<T> {
    /// An empty, open queue.
    pub(crate) fn new() -> Self {
        JobQueue {
            lanes: Mutex::new(Lanes {
                interactive: VecDeque::new(),
                background: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    /// Queue `job` in its lane; `Err` gives it back when the queue is closed.
    pub(crate) fn push(&self, priority: RequestPriority, job: T) -> Result<(), T> {
        let mut lanes = lock(&self.lanes);
        if lanes.closed {
            return Err(job);
        }
        match priority {
            RequestPriority::Interactive => lanes.interactive.push_back(job),
            RequestPriority::Background => lanes.background.push_back(job),
        }
        drop(lanes);
        self.ready.notify_one();
        Ok(())
    }

    /// The next job, interactive first, waiting for one; `None` once the queue is closed and
    /// empty.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut lanes = lock(&self.lanes);
        loop {
            if let Some(job) = lanes.interactive.pop_front() {
                return Some(job);
            }
            if let Some(job) = lanes.background.pop_front() {
                return Some(job);
            }
            if lanes.closed {
                return None;
            }
            // A poisoned lock only means a sender panicked mid-push; the lanes are still whole.
            lanes = self
                .ready
                .wait(lanes)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// The next job, interactive first, if one is queued (the worker asks between batches).
    pub(crate) fn try_pop(&self) -> Option<T> {
        let mut lanes = lock(&self.lanes);
        lanes
            .interactive
            .pop_front()
            .or_else(|| lanes.background.pop_front())
    }

    /// Take no more jobs; the worker drains what is queued and ends.
    pub(crate) fn close(&self) {
        lock(&self.lanes).closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_interactive_call_queued_later_runs_before_a_queued_background_one() {
        let queue = JobQueue::new();
        queue.push(RequestPriority::Background, "summary").unwrap();
        queue
            .push(RequestPriority::Background, "loop step")
            .unwrap();
        queue
            .push(RequestPriority::Interactive, "agent turn")
            .unwrap();
        queue
            .push(RequestPriority::Interactive, "other agent")
            .unwrap();
        assert_eq!(queue.pop(), Some("agent turn"));
        assert_eq!(queue.try_pop(), Some("other agent"));
        // Each lane keeps its arrival order.
        assert_eq!(queue.pop(), Some("summary"));
        assert_eq!(queue.pop(), Some("loop step"));
        assert_eq!(queue.try_pop(), None);
    }

    #[test]
    fn a_closed_queue_refuses_new_jobs_and_drains_the_queued_ones() {
        let queue = JobQueue::new();
        queue.push(RequestPriority::Background, 1).unwrap();
        queue.close();
        assert_eq!(queue.push(RequestPriority::Interactive, 2), Err(2));
        assert_eq!(queue.pop(), Some(1));
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn a_waiting_worker_wakes_for_a_job() {
        let queue = std::sync::Arc::new(JobQueue::new());
        let worker = {
            let queue = std::sync::Arc::clone(&queue);
            std::thread::spawn(move || queue.pop())
        };
        queue.push(RequestPriority::Background, 7).unwrap();
        assert_eq!(worker.join().unwrap(), Some(7));
    }
}
