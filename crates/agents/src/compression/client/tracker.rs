//! The team-wide record of running compactions, so that a `/compact` sent while an agent is in
//! the middle of one joins it instead of racing it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use troupe_runtime::Directory;

use super::{AppliedCompaction, CompactionAskError};

type Outcome = Option<Result<AppliedCompaction, CompactionAskError>>;

/// Running compactions by agent name (a directory extension: one per team).
#[derive(Default)]
pub(crate) struct CompactionTracker {
    in_flight: Mutex<HashMap<String, watch::Receiver<Outcome>>>,
}

impl CompactionTracker {
    pub(crate) fn of(directory: &Directory) -> Arc<CompactionTracker> {
        directory.extension(CompactionTracker::default)
    }

    /// Register a compaction of `agent`; it stays registered until the returned guard is
    /// dropped (however the compaction ends, a cancelled one included).
    pub(crate) fn begin(self: Arc<Self>, agent: &str) -> Running {
        let (publish, rx) = watch::channel(None);
        self.lock().insert(agent.to_string(), rx);
        Running {
            tracker: self,
            agent: agent.to_string(),
            publish,
        }
    }

    /// Wait for the compaction of `agent` that is running, if one is.
    ///
    /// `None` when none is running; `Some(Err(Abandoned))` when it ended without an outcome.
    pub(crate) async fn join(
        &self,
        agent: &str,
    ) -> Option<Result<AppliedCompaction, CompactionAskError>> {
        let mut running = self.lock().get(agent).cloned()?;
        let outcome = match running.wait_for(Option::is_some).await {
            Ok(outcome) => outcome.clone(),
            Err(_) => None,
        };
        Some(outcome.unwrap_or(Err(CompactionAskError::Abandoned)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Receiver<Outcome>>> {
        troupe_protocol::sync::lock(&self.in_flight)
    }
}

/// One registered compaction: [`Running::settle`] gives joiners its outcome; dropping it
/// unsettled (a cancelled compaction) tells them it was abandoned.
pub(crate) struct Running {
    tracker: Arc<CompactionTracker>,
    agent: String,
    publish: watch::Sender<Outcome>,
}

impl Running {
    /// Give everyone who joined the outcome.
    pub(crate) fn settle(&self, outcome: &Result<AppliedCompaction, CompactionAskError>) {
        let _ = self.publish.send(Some(outcome.clone()));
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.tracker.lock().remove(&self.agent);
    }
}
