//! The agent's link to its session log: the log itself when the spec names one (kept in step
//! with the conversation, one commit per commit point: `session/sync.rs`), the conversation id
//! its spans name, and the calls of a turn the log shows paused for approval.

use std::path::Path;

use troupe_protocol::{Conversation, ResponseFormat, TraceContext};
use troupe_runtime::AgentError;

use super::context::Context;
use super::jobs::SwitchError;
use crate::session::health::SessionBehind;
use crate::session::{
    PausedCall, Restored, SessionClaim, SessionError, SessionRecord, SessionSync, restore,
};
use crate::spec::AgentSpec;

/// The agent's session log, when it keeps one, and what belongs to it.
pub(super) struct SessionLink {
    /// The session log, when the spec names one.
    sync: Option<SessionSync>,
    /// What its `invoke_agent` spans record as `gen_ai.conversation.id` and `session.id`.
    pub(super) conversation_id: String,
    /// The open calls of a turn the session log shows paused for approval (`approval.rs`):
    /// answered before the next request.
    pub(super) paused: Vec<PausedCall>,
    /// Whether the log ends with a request in flight (durable steps): the agent resumes it
    /// before anything else (`in_flight.rs`).
    pub(super) in_flight: bool,
    /// The answer format of that request (a typed ask's schema), which its resumed model
    /// calls carry as its first ones did.
    pub(super) in_flight_format: Option<ResponseFormat>,
    /// Whether the log ends with a request in flight that failed (the agent was restarted from
    /// its checkpoint) after it was already resumed once, or in an agent that commits per
    /// request only: closed as rolled back once the agent is built.
    pub(super) failed_in_flight: bool,
    /// Whether the request in flight failed (a supervisor restart) and is resumed once: the
    /// attempt is committed as the agent is built (`steps.rs: note_resume_after_failure`).
    pub(super) resume_after_failure: bool,
    /// The conversation as that request found it (the checkpoint of its first failure), kept
    /// in the agent's checkpoint until the resume ends: a second failure rolls back to it.
    pub(super) before_in_flight: Option<Conversation>,
}

impl SessionLink {
    /// Open the log `spec` names (or the one `claim` holds after a `/resume`), locked for as
    /// long as the agent lives; what it restores comes back when the agent has no checkpoint,
    /// or when the log is newer than it (a turn paused for approval).
    pub(super) fn open(
        spec: &AgentSpec,
        has_checkpoint: bool,
        claim: Option<&SessionClaim>,
    ) -> Result<(Self, Option<Restored>), AgentError> {
        let mut link = SessionLink {
            sync: None,
            conversation_id: String::new(),
            paused: Vec::new(),
            in_flight: false,
            in_flight_format: None,
            failed_in_flight: false,
            resume_after_failure: false,
            before_in_flight: None,
        };
        let mut restored = None;
        // After a `/resume`, the claim holds the log the agent switched to: a rebuild keeps it.
        let path = claim
            .and_then(SessionClaim::held_path)
            .or_else(|| spec.session.clone());
        if let Some(path) = &path {
            let (mut sync, logged) = SessionSync::open(path, &spec.name, claim)
                .map_err(|e| AgentError::Failed(e.to_string()))?;
            for warning in &logged.warnings {
                tracing::warn!(agent = %spec.name, "{warning}");
            }
            // A turn paused for approval was written to the log mid-request, after the last
            // checkpoint: the log is newer then, and the agent resumes from it. So does a new
            // process from a request's steps (durable steps), and a supervisor restart (a
            // checkpoint) from the steps of the request that failed — once: its caller was
            // told it failed and is gone, but running it again from the start would repeat
            // every finished tool. A request already resumed once after a failure (the log
            // says so) or one without durable steps is closed as rolled back instead
            // (`LlmAgent::build`): the checkpoint wins, no failure is run into again and again.
            let asked = logged.paused.iter().any(|p| p.ask);
            let resume_once = has_checkpoint
                && logged.in_flight
                && !logged.in_flight_resumed
                && spec.durable_steps;
            if !has_checkpoint || asked || resume_once {
                let r = restore(&logged);
                link.paused.clone_from(&r.paused);
                link.in_flight = logged.in_flight;
                link.in_flight_format.clone_from(&logged.in_flight_format);
                link.resume_after_failure = has_checkpoint && logged.in_flight;
                restored = Some(r);
            } else if logged.in_flight {
                link.failed_in_flight = true;
            }
            // Written only once the log has restored: a log refused above stays as it was (apart
            // from a torn last line, which opening cuts off).
            sync.note_model(logged.model.as_deref(), &spec.model.info().name)
                .map_err(|e| AgentError::Failed(e.to_string()))?;
            link.sync = Some(sync);
        }
        link.conversation_id = conversation_id(&spec.name, path.as_deref());
        Ok((link, restored))
    }

    /// The first message id the log has not used (`None`: no log).
    pub(super) fn next_logged_id(&self) -> Option<u64> {
        self.sync.as_ref().map(SessionSync::next_id)
    }

    /// Whether the log is behind the conversation (`None`: in step, or no log).
    pub(super) fn behind(&self) -> Option<SessionBehind> {
        self.sync.as_ref().and_then(SessionSync::behind)
    }

    /// `/clear`'s record, written first: a failed write changes nothing. Then the paused calls
    /// go with the conversation; answers how many.
    pub(super) fn clear(&mut self) -> Result<usize, SessionError> {
        if let Some(sync) = &mut self.sync {
            sync.clear()?;
        }
        let dropped = self.paused.len();
        self.paused.clear();
        self.in_flight = false;
        self.in_flight_format = None;
        self.before_in_flight = None;
        Ok(dropped)
    }

    /// `/resume`: take the log at `path` (its lock, then its records) and let go of this one;
    /// what it restores comes back. On an error nothing changed.
    pub(super) fn switch(
        &mut self,
        path: &Path,
        agent: &str,
        model: &str,
    ) -> Result<Restored, SwitchError> {
        let Some(sync) = &self.sync else {
            return Err(SwitchError::NoSession(agent.to_string()));
        };
        let (sync, logged) = sync.switch(path, agent, model)?;
        for warning in &logged.warnings {
            tracing::warn!(agent = %agent, "{warning}");
        }
        let restored = restore(&logged);
        // Paused calls belong to their log: this log's own are the ones to finish (the old
        // log keeps its own, pending, for whoever resumes it).
        self.paused.clone_from(&restored.paused);
        self.in_flight = logged.in_flight;
        self.in_flight_format.clone_from(&logged.in_flight_format);
        self.before_in_flight = None;
        self.sync = Some(sync);
        self.conversation_id = conversation_id(agent, Some(path));
        Ok(restored)
    }

    /// A commit point: write what changed in `context` to the log, if there is one, with
    /// `extra` records in the same commit (a paused turn's). A failed write is logged, answered
    /// to [`session_health`](crate::session_health) (the caller's way to tell its user at once)
    /// and retried at the next boundary (the difference is recomputed then), so the answer is
    /// not lost to a full disk that frees up.
    pub(super) fn persist(&mut self, context: &Context, extra: Vec<SessionRecord>, agent: &str) {
        let Some(sync) = &mut self.sync else {
            return;
        };
        if let Err(e) = sync.persist_with(
            &context.conversation,
            &context.archive,
            &context.ledger.snapshot(),
            context.last_compaction.as_ref(),
            extra,
        ) {
            tracing::error!(
                agent = %agent,
                session = %sync.path().display(),
                error = %e,
                "could not write the session log; will retry at the next commit point"
            );
        }
    }
}

/// The conversation an agent's spans name: its session log (the same log is the same
/// conversation across runs), else one id for this agent's life in this process.
fn conversation_id(agent: &str, session: Option<&Path>) -> String {
    match session {
        Some(path) => format!("{agent}@{}", path.display()),
        None => format!("{agent}-{}", TraceContext::new_root().id()),
    }
}
