//! [`SessionClaim`]: the claim on an agent's session log, held by whoever owns the agent for its
//! whole life — the factory the supervisor rebuilds it with — so a rebuilt agent reopens its log
//! under the same claim instead of finding it locked by its own failed predecessor.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::error::SessionError;
use super::records::Session;
use super::store::{Claimed, CommitLog, SessionStore};

/// The claim on an agent's session log in its store, shared by every build of that agent (an
/// agent factory holds one): taken at the first build, released when the last holder goes.
#[derive(Clone, Default)]
pub struct SessionClaim {
    store: SessionStore,
    held: Arc<Mutex<Option<Box<dyn Claimed>>>>,
}

impl SessionClaim {
    /// A claim on logs of `store` (the default claim is on files).
    pub fn new(store: SessionStore) -> Self {
        SessionClaim {
            store,
            held: Arc::default(),
        }
    }

    /// Open the log at `path` under this claim, taking it first if it is not yet held.
    pub(super) fn open(
        &self,
        path: &Path,
        agent: &str,
    ) -> Result<(Box<dyn CommitLog>, Session), SessionError> {
        // A panic elsewhere while this was held leaves a valid `Option`: poison is moot.
        let mut slot = troupe_protocol::sync::lock(&self.held);
        let claimed = match slot.take() {
            Some(claimed) if claimed.log_path() == path => claimed,
            _ => self.store.claim(path)?,
        };
        let opened = claimed.open(Some(agent));
        *slot = Some(claimed);
        opened
    }

    /// The log this claim holds now: after a [`super::SessionSync::switch`], not the one the
    /// agent's spec names, so a rebuilt agent reopens the log it last kept.
    pub fn held_path(&self) -> Option<PathBuf> {
        troupe_protocol::sync::lock(&self.held)
            .as_ref()
            .map(|claimed| claimed.log_path().to_path_buf())
    }

    /// Open the log at `path` and, once `prepare` accepted it, hold its claim instead of the one
    /// held now. Any failure leaves the claim as it was.
    pub(super) fn switch(
        &self,
        path: &Path,
        agent: &str,
        prepare: impl FnOnce(&mut dyn CommitLog, &Session) -> Result<(), SessionError>,
    ) -> Result<(Box<dyn CommitLog>, Session), SessionError> {
        let mut slot = troupe_protocol::sync::lock(&self.held);
        if let Some(held) = slot.as_ref().filter(|claimed| claimed.log_path() == path) {
            let (mut log, session) = held.open(Some(agent))?;
            prepare(log.as_mut(), &session)?;
            return Ok((log, session));
        }
        let fresh = self.store.claim(path)?;
        let (mut log, session) = fresh.open(Some(agent))?;
        prepare(log.as_mut(), &session)?;
        // The old claim goes only now: the agent is never left without a log.
        *slot = Some(fresh);
        Ok((log, session))
    }
}
