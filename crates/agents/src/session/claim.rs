//! [`SessionClaim`]: the lock on an agent's session log, held by whoever owns the agent for its
//! whole life — the factory the supervisor rebuilds it with — so a rebuilt agent reopens its log
//! under the same claim instead of finding it locked by its own failed predecessor.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::error::SessionError;
use super::lock::SessionLock;
use super::log::SessionLog;
use super::records::Session;

/// The claim on an agent's session log, shared by every build of that agent (an agent factory
/// holds one): taken at the first build, released when the last holder goes.
#[derive(Clone, Default)]
pub(crate) struct SessionClaim(Arc<Mutex<Option<SessionLock>>>);

impl SessionClaim {
    /// Open the log at `path` under this claim, taking it first if it is not yet held.
    pub(super) fn open(
        &self,
        path: &Path,
        agent: &str,
    ) -> Result<(SessionLog, Session), SessionError> {
        // A panic elsewhere while this was held leaves a valid `Option`: poison is moot.
        let mut slot = troupe_protocol::sync::lock(&self.0);
        let lock = match slot.take() {
            Some(lock) if lock.log_path() == path => lock,
            _ => SessionLock::acquire(path)?,
        };
        let opened = SessionLog::open_locked(&lock, Some(agent));
        *slot = Some(lock);
        opened
    }

    /// The log this claim holds now: after a [`super::SessionSync::switch`], not the one the
    /// agent's spec names, so a rebuilt agent reopens the log it last kept.
    pub(crate) fn held_path(&self) -> Option<PathBuf> {
        troupe_protocol::sync::lock(&self.0)
            .as_ref()
            .map(|lock| lock.log_path().to_path_buf())
    }

    /// Open the log at `path` and, once `prepare` accepted it, hold its lock instead of the one
    /// held now. Any failure leaves the claim as it was.
    pub(super) fn switch(
        &self,
        path: &Path,
        agent: &str,
        prepare: impl FnOnce(&mut SessionLog, &Session) -> Result<(), SessionError>,
    ) -> Result<(SessionLog, Session), SessionError> {
        let mut slot = troupe_protocol::sync::lock(&self.0);
        if let Some(held) = slot.as_ref().filter(|lock| lock.log_path() == path) {
            let (mut log, session) = SessionLog::open_locked(held, Some(agent))?;
            prepare(&mut log, &session)?;
            return Ok((log, session));
        }
        let fresh = SessionLock::acquire(path)?;
        let (mut log, session) = SessionLog::open_locked(&fresh, Some(agent))?;
        prepare(&mut log, &session)?;
        // The old lock goes only now: the agent is never left without a log.
        *slot = Some(fresh);
        Ok((log, session))
    }
}
