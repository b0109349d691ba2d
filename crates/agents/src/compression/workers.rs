//! The compression agent's workers: its mailbox only queues jobs (a job is answered later,
//! through its port), and up to `max_concurrent` of them run at once, each as a task of its
//! own, taken from the [`Schedule`] most urgent first. A job that ends — answered, failed or
//! panicked — frees its agent and its slot, and the next job starts. When the compression
//! agent stops, its running jobs end before it does ([`Workers::stop`]).

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::task::JoinSet;
use troupe_protocol::sync::lock;

use crate::compression::schedule::{Schedule, Urgency};

/// What the workers need to know of a job.
pub(crate) trait Task: Send + 'static {
    /// Whose job it is (one job of an agent runs at a time).
    fn agent(&self) -> &str;
    /// How urgent it is.
    fn urgency(&self) -> Urgency;
    /// Whether a newer job of the same agent takes its place while it waits (a compaction).
    fn replaceable(&self) -> bool;
    /// Take the place of `older`, queued for the same agent (keep what it must not lose).
    fn take_place_of(&mut self, older: &Self);
    /// Answer it: a newer job of its agent took its place before it ran.
    fn superseded(self);
    /// Do it and answer it.
    fn run(self) -> BoxFuture<'static, ()>;
}

/// The pool: the schedule and how many jobs may run at once.
pub(crate) struct Workers<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    schedule: Mutex<Schedule<T>>,
    max_concurrent: usize,
    /// The running jobs' tasks (locked after `schedule` when both are).
    tasks: Mutex<Tasks>,
}

/// The running jobs' tasks, and whether the pool has stopped (then nothing more starts).
#[derive(Default)]
struct Tasks {
    set: JoinSet<()>,
    stopped: bool,
}

impl<T: Task> Workers<T> {
    /// A pool running at most `max_concurrent` jobs at once (at least one).
    pub(crate) fn new(max_concurrent: usize) -> Self {
        Workers {
            shared: Arc::new(Shared {
                schedule: Mutex::new(Schedule::default()),
                max_concurrent: max_concurrent.max(1),
                tasks: Mutex::default(),
            }),
        }
    }

    /// Queue `task` (in place of its agent's queued one, which is answered "superseded") and
    /// start what may start. Returns at once; the task is answered when it has run.
    pub(crate) fn submit(&self, mut task: T) {
        let older = {
            let mut schedule = lock(&self.shared.schedule);
            let older = if task.replaceable() {
                schedule.take_replaceable(task.agent())
            } else {
                None
            };
            if let Some(older) = &older {
                task.take_place_of(older);
            }
            let (agent, urgency, replaceable) =
                (task.agent().to_string(), task.urgency(), task.replaceable());
            schedule.push(agent, urgency, replaceable, task);
            older
        };
        if let Some(older) = older {
            older.superseded();
        }
        start_ready(&self.shared);
    }
}

impl<T> Workers<T> {
    /// Rank `agent`'s queued compaction by `room`, the room it has now (see
    /// [`Schedule::hurry`]); `false` when none is queued (it runs already, or there is none).
    pub(crate) fn hurry(&self, agent: &str, room: i64) -> bool {
        lock(&self.shared.schedule).hurry(agent, room)
    }

    /// Stop: nothing more starts, the queued jobs are dropped (their askers are told no
    /// answer comes) and the running ones are cancelled; returns once every task has ended, so
    /// no job outlives its compression agent — a job runs inside its asker's `compaction`
    /// span, which would otherwise stay open past shutdown.
    pub(crate) async fn stop(&self) {
        let (queued, mut running) = {
            let mut schedule = lock(&self.shared.schedule);
            let mut tasks = lock(&self.shared.tasks);
            tasks.stopped = true;
            (schedule.drain(), std::mem::take(&mut tasks.set))
        };
        drop(queued);
        running.shutdown().await;
    }
}

/// Start the most urgent runnable jobs while slots are free.
fn start_ready<T: Task>(shared: &Arc<Shared<T>>) {
    // Outside a runtime (one shutting down dropped a task) nothing more can start; what is
    // queued is dropped with the pool and its askers are told no answer came.
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut schedule = lock(&shared.schedule);
    let mut tasks = lock(&shared.tasks);
    if tasks.stopped {
        return;
    }
    // Reap the ended tasks (their output is nothing), so the set holds only running ones.
    while tasks.set.try_join_next().is_some() {}
    while schedule.running() < shared.max_concurrent {
        let Some((agent, task)) = schedule.start_next() else {
            break;
        };
        let slot = Slot {
            shared: Arc::clone(shared),
            agent,
        };
        let job = async move {
            // Dropped when the task ends, also by a panic or a cancellation: the agent and the
            // slot are freed.
            let _slot = slot;
            task.run().await;
        };
        tasks.set.spawn_on(job, &runtime);
    }
}

/// A running job's hold on its agent and its slot.
struct Slot<T: Task> {
    shared: Arc<Shared<T>>,
    agent: String,
}

impl<T: Task> Drop for Slot<T> {
    fn drop(&mut self) {
        lock(&self.shared.schedule).finish(&self.agent);
        start_ready(&self.shared);
    }
}
