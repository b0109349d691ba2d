//! The agent's journal: everything durable about the request it handles, in one place — the
//! session log (when the spec names one), the request's place in it ([`InFlight`]), the calls
//! of a turn the log shows paused, and the one [`Journal::commit`] of a typed [`Step`].
//!
//! A step is what the agent is about to act on (a model's answer, the calls about to run, a
//! tool's result…); committing it writes what changed in the conversation since the last
//! commit and the step's own records as one commit (`session/sync.rs` computes the
//! difference, `session/log.rs` writes and fsyncs it). Which steps are written is decided here
//! once ([`Journal::writes`]): with durable steps every one, otherwise only those a paused turn
//! needs and the request's end.

use std::collections::BTreeMap;
use std::path::Path;

use troupe_protocol::{Conversation, ResponseFormat, ToolCall, TraceContext, Usage};
use troupe_runtime::AgentError;

use super::context::Context;
use super::jobs::SwitchError;
use crate::spec::AgentSpec;
use troupe_session::SessionBehind;
use troupe_session::{
    HandledRequest, LoggedFormat, PausedCall, RequestOutcome, Restored, Session, SessionClaim,
    SessionError, SessionRecord, SessionSync, restore,
};

/// Where the agent stands with a request of its log.
#[derive(Debug, Clone, Default)]
pub(super) enum InFlight {
    /// No request is open in the log.
    #[default]
    Idle,
    /// A request is being handled and nothing of it is committed yet: its first commit, just
    /// before its first model call, opens it; a request refused before that leaves the log as
    /// it was.
    Opening {
        /// The answer format its model calls carry (a typed ask's schema), logged at opening.
        format: Option<ResponseFormat>,
    },
    /// A request open in the log and being handled (or resumed): its end closes it.
    Open {
        /// The conversation as the request found it, when it is resumed after the agent failed
        /// in it (a supervisor restart): where a second failure rolls it back to.
        before: Option<Conversation>,
    },
    /// The log ends with a request in flight that nothing handles yet (the process or the agent
    /// stopped in the middle of it): the agent resumes it before anything else.
    Unresumed {
        /// Its answer format, which its resumed model calls carry as its first ones did.
        format: Option<ResponseFormat>,
        /// As [`InFlight::Open`]'s.
        before: Option<Conversation>,
    },
}

/// What an agent built on a log does with the request the log shows in flight: a pure
/// decision ([`at_open`]) the build carries out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AtOpen {
    /// No request in flight: nothing to do.
    Nothing,
    /// A new process: resume the request from its last committed step.
    Resume,
    /// A supervisor restart (the agent failed fatally in the request): resume it once,
    /// committing the attempt first (`request_resuming`), so a second failure rolls it back.
    ResumeAfterFailure,
    /// A request already resumed once after a failure, or one without durable steps: close it
    /// as rolled back, as the checkpoint says (no failure is run into again and again).
    CloseAsRolledBack,
}

/// What the log restores, and what becomes of its request in flight, for an agent built with
/// or without a checkpoint. A turn paused for approval was written to the log mid-request,
/// after the last checkpoint: the log is newer then, and the agent resumes from it. So does a
/// new process from a request's steps (durable steps), and a supervisor restart from the steps
/// of the request that failed — once: its caller was told it failed and is gone, but running it
/// again from the start would repeat every finished tool.
pub(super) fn at_open(
    has_checkpoint: bool,
    logged: &Session,
    durable_steps: bool,
) -> (bool, AtOpen) {
    let asked = logged.paused.iter().any(|p| p.ask);
    let resume_once =
        has_checkpoint && logged.in_flight && !logged.in_flight_resumed && durable_steps;
    let restores = !has_checkpoint || asked || resume_once;
    let at = match (restores, logged.in_flight, has_checkpoint) {
        (_, false, _) => AtOpen::Nothing,
        (true, true, false) => AtOpen::Resume,
        (true, true, true) => AtOpen::ResumeAfterFailure,
        (false, true, _) => AtOpen::CloseAsRolledBack,
    };
    (restores, at)
}

/// One commit's worth of what the agent is about to act on.
#[derive(Debug)]
pub(super) enum Step<'a> {
    /// What changed, nothing more: a compaction or a closed scope, a pin, a changed system
    /// prompt, a paused turn's results, what landed at shutdown.
    Changes,
    /// Before a model call: a compaction on the way, and the request's opening when this is
    /// its first commit.
    BeforeCall,
    /// A model's answer (just pushed), with its usage and its tool calls left open until their
    /// results.
    Answer {
        /// What the call cost.
        usage: Usage,
        /// The calls it asked for.
        calls: &'a [ToolCall],
    },
    /// A turn paused for approval with these calls of its assistant message open.
    Paused(Vec<PausedCall>),
    /// A batch's calls about to run, and its refused ones (denied, unanswered) answered.
    Settled {
        /// The ids of the calls about to run.
        started: Vec<String>,
        /// The refused calls' ids and their answers.
        refused: Vec<(String, String)>,
        /// Whether the batch's pause is in the log (then it is written without durable steps
        /// too: a restart must not ask again about a call answered or run).
        pause_logged: bool,
    },
    /// A tool call's result, as it completes, before the rest of its batch.
    CallResult {
        /// The tool call's id.
        call_id: String,
        /// What the tool answered the model.
        content: String,
    },
    /// A batch's results as messages: its calls are answered.
    Results,
    /// The request ended so.
    Closed(RequestOutcome),
    /// The request in flight is resumed after the agent failed in it: committed before
    /// anything of it runs.
    Resuming,
    /// The request the log shows in flight failed (the agent was rebuilt from its checkpoint,
    /// its caller told) and is not resumed: the log follows the checkpoint, closing it as
    /// rolled back.
    FailedInFlight,
}

/// The agent's journal: its session log, the request's place in it, the paused calls.
pub(super) struct Journal {
    /// The session log, when the spec names one.
    log: Option<SessionSync>,
    /// Whether a request is committed step by step ([`AgentSpec::durable_steps`]).
    durable_steps: bool,
    /// The agent's name, for what a failed write logs.
    agent: String,
    /// What its `invoke_agent` spans record as `gen_ai.conversation.id` and `session.id`.
    pub(super) conversation_id: String,
    /// The open calls of a turn the session log shows paused (`approval.rs`): answered before
    /// the next request.
    pub(super) paused: Vec<PausedCall>,
    /// The request's place in the log.
    in_flight: InFlight,
    /// The id of the request being handled (or the one the log shows in flight), when its
    /// caller gave one: logged at its opening, known as handled at its close.
    request_id: Option<String>,
    /// The requests of an id this agent's log closed, answered or failed: one asked again
    /// (a retry after its first home died) is answered from here, never run twice.
    handled: BTreeMap<String, HandledRequest>,
    /// Why this agent may no longer write its log, once a commit was refused because another
    /// owner holds it now (a shared store's fencing): it writes nothing after that, and acts on
    /// nothing it could not commit.
    fenced: Option<String>,
}

impl Journal {
    /// Open the log `spec` names (or the one `claim` holds after a `/resume`), locked for as
    /// long as the agent lives; what it restores comes back when [`at_open`] says so, with
    /// what becomes of its request in flight.
    pub(super) fn open(
        spec: &AgentSpec,
        has_checkpoint: bool,
        claim: Option<&SessionClaim>,
    ) -> Result<(Self, Option<Restored>, AtOpen), AgentError> {
        let mut journal = Journal {
            log: None,
            durable_steps: spec.durable_steps,
            agent: spec.name.clone(),
            conversation_id: String::new(),
            paused: Vec::new(),
            fenced: None,
            in_flight: InFlight::Idle,
            request_id: None,
            handled: BTreeMap::new(),
        };
        let (mut restored, mut at) = (None, AtOpen::Nothing);
        // After a `/resume`, the claim holds the log the agent switched to: a rebuild keeps it.
        let path = claim
            .and_then(SessionClaim::held_path)
            .or_else(|| spec.session.clone());
        if let Some(path) = &path {
            // An agent built without its factory's claim takes one of its own in its store.
            let own;
            let claim = match claim {
                Some(claim) => claim,
                None => {
                    own = SessionClaim::new(spec.session_store.clone());
                    &own
                }
            };
            let (mut sync, logged) = SessionSync::open(path, &spec.name, Some(claim))
                .map_err(|e| AgentError::Failed(e.to_string()))?;
            for warning in &logged.warnings {
                tracing::warn!(agent = %spec.name, "{warning}");
            }
            let restores;
            (restores, at) = at_open(has_checkpoint, &logged, spec.durable_steps);
            // What the log handled is known whichever state the agent restores from.
            journal.handled.clone_from(&logged.handled);
            if restores {
                let r = restore(&logged);
                journal.paused.clone_from(&r.paused);
                if logged.in_flight {
                    journal.in_flight = InFlight::Unresumed {
                        format: logged.in_flight_format.clone(),
                        before: None,
                    };
                    journal.request_id.clone_from(&logged.in_flight_request);
                }
                restored = Some(r);
            }
            // Written only once the log has restored: a log refused above stays as it was (apart
            // from a torn last line, which opening cuts off).
            sync.note_model(logged.model.as_deref(), &spec.model.info().name)
                .map_err(|e| AgentError::Failed(e.to_string()))?;
            journal.log = Some(sync);
        }
        journal.conversation_id = conversation_id(&spec.name, path.as_deref());
        Ok((journal, restored, at))
    }

    /// A request resumed after a failure rolls back, if it fails again, to `before` (the
    /// conversation the checkpoint of its first failure holds).
    pub(super) fn keep_before_in_flight(&mut self, before: Option<Conversation>) {
        if let InFlight::Unresumed { before: kept, .. } = &mut self.in_flight {
            *kept = before;
        }
    }

    /// The conversation as the request in flight found it, while it is resumed after a
    /// failure (what the agent's checkpoint keeps).
    pub(super) fn before_in_flight(&self) -> Option<&Conversation> {
        match &self.in_flight {
            InFlight::Open { before } | InFlight::Unresumed { before, .. } => before.as_ref(),
            InFlight::Idle | InFlight::Opening { .. } => None,
        }
    }

    /// Whether the log shows a request in flight that is not resumed yet.
    pub(super) fn unresumed(&self) -> bool {
        matches!(self.in_flight, InFlight::Unresumed { .. })
    }

    /// A request starts: its first commit opens it in the log, logging `format` and its id.
    pub(super) fn begin_request(
        &mut self,
        format: Option<&ResponseFormat>,
        request_id: Option<String>,
    ) {
        self.in_flight = InFlight::Opening {
            format: format.cloned(),
        };
        self.request_id = request_id;
    }

    /// The answer to the request of id `id` when this agent's log closed it before: its
    /// answer, or its failure (it is not run again).
    pub(super) fn answer_of(&self, id: &str) -> Option<Result<String, AgentError>> {
        self.handled.get(id).map(|handled| match handled {
            HandledRequest::Answered(answer) => Ok(answer.clone()),
            _ => Err(AgentError::Failed(format!(
                "request `{id}` was handled before and failed; it is not run again"
            ))),
        })
    }

    /// The request being handled closed so: an answered or failed one of an id is handled
    /// (a rolled-back one left nothing behind and may run again).
    pub(super) fn settle(&mut self, closed: RequestOutcome, outcome: &Result<String, AgentError>) {
        let Some(id) = self.request_id.take() else {
            return;
        };
        let handled = match (closed, outcome) {
            (RequestOutcome::Answered, Ok(answer)) => HandledRequest::Answered(answer.clone()),
            (RequestOutcome::RolledBack, _) => return,
            _ => HandledRequest::Failed,
        };
        self.handled.insert(id, handled);
    }

    /// The request the log shows in flight is taken up: open from here on. Returns its answer
    /// format; `None` when none was in flight.
    pub(super) fn take_up_in_flight(&mut self) -> Option<Option<ResponseFormat>> {
        match std::mem::take(&mut self.in_flight) {
            InFlight::Unresumed { format, before } => {
                self.in_flight = InFlight::Open { before };
                Some(format)
            }
            other => {
                self.in_flight = other;
                None
            }
        }
    }

    /// The request being handled is over, whatever its end wrote: a later failure is of
    /// another request.
    pub(super) fn end_request(&mut self) {
        self.in_flight = InFlight::Idle;
        self.request_id = None;
    }

    /// Whether the request being handled is open in the log (its end is to be closed there).
    pub(super) fn request_open(&self) -> bool {
        matches!(self.in_flight, InFlight::Open { .. })
    }

    /// The first message id the log has not used (`None`: no log).
    pub(super) fn next_logged_id(&self) -> Option<u64> {
        self.log.as_ref().map(SessionSync::next_id)
    }

    /// Whether the log is behind the conversation (`None`: in step, or no log).
    pub(super) fn behind(&self) -> Option<SessionBehind> {
        self.log.as_ref().and_then(SessionSync::behind)
    }

    /// `/clear`'s record, written first: a failed write changes nothing. Then the paused calls
    /// and the request in flight go with the conversation; answers how many calls.
    pub(super) fn clear(&mut self) -> Result<usize, SessionError> {
        if let Some(log) = &mut self.log {
            log.clear()?;
        }
        let dropped = self.paused.len();
        self.paused.clear();
        self.in_flight = InFlight::Idle;
        self.request_id = None;
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
        let Some(log) = &self.log else {
            return Err(SwitchError::NoSession(agent.to_string()));
        };
        let (log, logged) = log.switch(path, agent, model)?;
        for warning in &logged.warnings {
            tracing::warn!(agent = %agent, "{warning}");
        }
        let restored = restore(&logged);
        // Paused calls belong to their log: this log's own are the ones to finish (the old
        // log keeps its own, pending, for whoever resumes it).
        self.paused.clone_from(&restored.paused);
        self.handled.clone_from(&logged.handled);
        self.request_id.clone_from(&logged.in_flight_request);
        self.in_flight = if logged.in_flight {
            InFlight::Unresumed {
                format: logged.in_flight_format.clone(),
                before: None,
            }
        } else {
            InFlight::Idle
        };
        self.log = Some(log);
        self.conversation_id = conversation_id(agent, Some(path));
        Ok(restored)
    }

    /// Whether `step` is written: with durable steps every one; otherwise what a paused turn
    /// needs (its pause, and what settled it) and what changed at the request's end.
    fn writes(&self, step: &Step<'_>) -> bool {
        match step {
            // The request's end always writes what changed (its close record only when open).
            Step::Changes
            | Step::Paused(_)
            | Step::Closed(_)
            | Step::Resuming
            | Step::FailedInFlight => true,
            Step::Settled { pause_logged, .. } => self.durable_steps || *pause_logged,
            Step::BeforeCall | Step::Answer { .. } | Step::CallResult { .. } | Step::Results => {
                self.durable_steps
            }
        }
    }

    /// The records `step` adds to what changed, and the request's place after it.
    fn records_of(&mut self, step: Step<'_>) -> Vec<SessionRecord> {
        match step {
            Step::Changes | Step::Results => Vec::new(),
            Step::BeforeCall => match std::mem::take(&mut self.in_flight) {
                InFlight::Opening { format } => {
                    self.in_flight = InFlight::Open { before: None };
                    vec![SessionRecord::RequestOpened {
                        response_format: format.as_ref().map(LoggedFormat::from),
                        request_id: self.request_id.clone(),
                    }]
                }
                other => {
                    self.in_flight = other;
                    Vec::new()
                }
            },
            Step::Answer { usage, calls } => {
                let mut records = vec![SessionRecord::ModelAnswer { usage }];
                if !calls.is_empty() {
                    let open = calls
                        .iter()
                        .map(|c| PausedCall {
                            call_id: c.id.clone(),
                            tool: c.function.name.clone(),
                            arguments: c.function.arguments.clone(),
                            ask: false,
                            approval: None,
                            started: false,
                            result: None,
                        })
                        .collect();
                    records.push(SessionRecord::Paused { calls: open });
                }
                records
            }
            Step::Paused(calls) => vec![SessionRecord::Paused { calls }],
            Step::Settled {
                started, refused, ..
            } => {
                // A resumed turn abandoned while these run is not asked about again either.
                for p in &mut self.paused {
                    if started.contains(&p.call_id) {
                        p.started = true;
                    }
                    if let Some((_, content)) = refused.iter().find(|(id, _)| *id == p.call_id) {
                        p.result = Some(content.clone());
                    }
                }
                let mut records = Vec::with_capacity(refused.len() + 1);
                if !started.is_empty() {
                    records.push(SessionRecord::CallsStarted { call_ids: started });
                }
                records.extend(
                    refused
                        .into_iter()
                        .map(|(call_id, content)| SessionRecord::CallResult { call_id, content }),
                );
                records
            }
            Step::CallResult { call_id, content } => {
                vec![SessionRecord::CallResult { call_id, content }]
            }
            Step::Closed(outcome) => {
                let open = self.request_open();
                self.in_flight = InFlight::Idle;
                if open && self.durable_steps {
                    vec![SessionRecord::RequestClosed { outcome }]
                } else {
                    Vec::new()
                }
            }
            Step::Resuming => vec![SessionRecord::RequestResuming],
            Step::FailedInFlight => {
                self.in_flight = InFlight::Idle;
                self.request_id = None;
                vec![SessionRecord::RequestClosed {
                    outcome: RequestOutcome::RolledBack,
                }]
            }
        }
    }

    /// Commit `step`: what changed in `context` since the last commit and the step's records,
    /// as one commit, when the agent keeps a log and the step is one it writes. A failed write
    /// is logged, answered to [`LlmAgentHandle::session_health`](crate::LlmAgentHandle::session_health)
    /// (the caller's way to tell its user at once) and retried at the next commit (the
    /// difference is recomputed then), so the answer is not lost to a full disk that frees up.
    pub(super) fn commit(&mut self, context: &Context, step: Step<'_>) {
        if !self.writes(&step) {
            return;
        }
        if self.fenced.is_some() {
            return;
        }
        let records = self.records_of(step);
        let Some(log) = &mut self.log else {
            return;
        };
        if let Err(e) = log.persist_with(
            &context.conversation,
            &context.archive,
            &context.ledger.snapshot(),
            context.last_compaction.as_ref(),
            records,
        ) {
            if e.is_fenced() {
                tracing::error!(
                    agent = %self.agent,
                    session = %log.path().display(),
                    error = %e,
                    "another owner holds the session log now: this agent writes and acts no more"
                );
                self.fenced = Some(e.to_string());
                return;
            }
            tracing::error!(
                agent = %self.agent,
                session = %log.path().display(),
                error = %e,
                "could not write the session log; will retry at the next commit point"
            );
        }
    }

    /// Why the agent may no longer write its log (another owner holds it now), once a commit
    /// found it so.
    pub(super) fn fenced(&self) -> Option<&str> {
        self.fenced.as_deref()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(in_flight: bool, resumed: bool, asked: bool) -> Session {
        let mut session = Session {
            in_flight,
            in_flight_resumed: resumed,
            ..Session::default()
        };
        if asked {
            session.paused.push(PausedCall {
                call_id: "c".into(),
                tool: "t".into(),
                arguments: "{}".into(),
                ask: true,
                approval: None,
                started: false,
                result: None,
            });
        }
        session
    }

    #[test]
    fn a_new_process_restores_and_resumes_the_request_in_flight() {
        assert_eq!(
            at_open(false, &logged(true, false, false), true),
            (true, AtOpen::Resume)
        );
        assert_eq!(
            at_open(false, &logged(false, false, false), true),
            (true, AtOpen::Nothing)
        );
    }

    #[test]
    fn a_restart_resumes_once_then_rolls_back() {
        assert_eq!(
            at_open(true, &logged(true, false, false), true),
            (true, AtOpen::ResumeAfterFailure)
        );
        assert_eq!(
            at_open(true, &logged(true, true, false), true),
            (false, AtOpen::CloseAsRolledBack)
        );
        // Request-level commits resume nothing after a restart.
        assert_eq!(
            at_open(true, &logged(true, false, false), false),
            (false, AtOpen::CloseAsRolledBack)
        );
        // No request in flight: the checkpoint wins.
        assert_eq!(
            at_open(true, &logged(false, false, false), true),
            (false, AtOpen::Nothing)
        );
    }

    #[test]
    fn a_turn_paused_for_a_person_is_newer_than_the_checkpoint() {
        assert_eq!(
            at_open(true, &logged(false, false, true), true),
            (true, AtOpen::Nothing)
        );
        assert_eq!(
            at_open(true, &logged(true, true, true), false),
            (true, AtOpen::ResumeAfterFailure)
        );
    }
}
