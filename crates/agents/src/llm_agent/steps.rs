//! Durable steps: a request committed to the session log step by step (each commit a typed
//! `Step` through the journal, `journal.rs`), and resumed from its last committed step after a
//! restart.
//!
//! With [`AgentSpec::durable_steps`](crate::AgentSpec::durable_steps) (the default) a request's
//! commits are: its user message with a `request_opened` record, just before its first model
//! call (with a compaction on the way, if any); every model answer with a
//! `model_answer` record (its usage) and its tool calls open (`paused`, `ask: false`); the calls
//! about to run (`calls_started`); each tool result as it completes (`call_result`); the batch's
//! results as messages; a compaction on the way; and the end (`request_closed`). Each is
//! committed before the agent acts on it, so a process killed at any point resumes the request
//! from the last one: no model answer in the log is asked for again, no finished tool runs
//! again, and a call that had started without a result is answered as interrupted
//! (`approval.rs: finish_paused`, the road a turn paused for approval already takes).
//!
//! A supervisor restart (the agent failed fatally mid-request and was rebuilt) resumes the
//! request in flight the same way, once: the attempt is committed first
//! (`request_resuming`), and a request that fails again is closed as rolled back at the next
//! rebuild, as its checkpoint says, so a request that fails deterministically never loops.
//!
//! The request's caller is gone after a restart: the resumed request's answer is in the log and
//! on the bus ([`Event::RequestResumed`]).

use troupe_protocol::{Event, ResponseFormat, Role, TraceContext};
use troupe_runtime::{AgentContext, AgentError};

use super::LlmAgent;
use super::journal::Step;
use super::request::RequestContext;
use troupe_session::RequestOutcome;

/// What a request's rollback puts back besides the conversation.
pub(super) struct BeforeRequest {
    archive: troupe_compaction::Archive,
    report: Option<troupe_protocol::CompactionReport>,
}

impl LlmAgent {
    /// Commit `step` to the journal (`journal.rs`, which decides whether it is written).
    pub(super) fn commit(&mut self, step: Step<'_>) {
        self.journal.commit(&self.context, step);
    }

    /// Commit `step`, which the agent is about to act on (a model call, tools to run): once
    /// another owner holds the log (fencing), the request stops here instead, so nothing runs
    /// that is not in the log its successor resumes from — and the agent goes: the error is
    /// fatal, and its rebuild is refused the log (`SessionError::Fenced`), which stops it for
    /// good (`AskError::AgentStopped`, `Event::AgentStopped`).
    pub(super) fn commit_before_acting(&mut self, step: Step<'_>) -> Result<(), AgentError> {
        self.commit(step);
        match self.journal.fenced() {
            Some(why) => Err(AgentError::Fatal(format!("the request stops: {why}"))),
            None => Ok(()),
        }
    }

    /// What a rollback of the request starting now puts back (O(1) copies).
    pub(super) fn before_request(&self) -> BeforeRequest {
        BeforeRequest {
            archive: self.context.archive.clone(),
            report: self.context.last_compaction.clone(),
        }
    }

    /// A request's end: roll back what a failure says to, then commit (with a `request_closed`
    /// when steps are durable).
    pub(super) fn close_request(
        &mut self,
        outcome: Result<String, AgentError>,
        req: &mut RequestContext,
        before: BeforeRequest,
    ) -> Result<String, AgentError> {
        let rolled_back = matches!(
            &outcome,
            Err(AgentError::Model(_)
                | AgentError::Cancelled
                | AgentError::Refused(_)
                | AgentError::ContextOverflow(_))
        );
        if rolled_back {
            // A provider fault loses nothing and adds nothing: the caller may simply retry. An
            // abandoned request leaves the conversation as it found it too, and so does one
            // refused before its model call (`ContextOverflow`): the caller may send less.
            req.roll_back(&mut self.context.conversation, &self.spec.name);
        }
        if let Err(AgentError::Refused(_) | AgentError::ContextOverflow(_)) = &outcome {
            // A compaction before the refusal is undone whole, so the session log stays as the
            // request found it (new archive entries would be written as a compaction).
            self.context.archive = before.archive;
            self.context.last_compaction = before.report;
        }
        if rolled_back {
            self.skip_logged_ids();
        }
        let closed = if rolled_back {
            RequestOutcome::RolledBack
        } else if outcome.is_ok() {
            RequestOutcome::Answered
        } else {
            RequestOutcome::Failed
        };
        // The actor publishes the request's finish once this returns: after the session log.
        self.commit(Step::Closed(closed));
        self.journal.settle(closed, &outcome);
        outcome
    }

    /// The request the log shows in flight failed (the agent was restarted from its
    /// checkpoint, its caller told): the log follows the checkpoint, closing it as rolled back.
    pub(super) fn close_failed_in_flight(&mut self) {
        self.skip_logged_ids();
        self.commit(Step::FailedInFlight);
    }

    /// After a rollback: the ids the rolled-back messages had are not handed out again when the
    /// log holds them (its steps were committed), since a log never takes an id twice.
    fn skip_logged_ids(&mut self) {
        let Some(next) = self.journal.next_logged_id() else {
            return;
        };
        while self.context.conversation.next_id().0 < next {
            self.context.conversation.allocate_id();
        }
    }

    /// Whether the session log showed a request in flight that is not resumed yet.
    pub fn request_in_flight(&self) -> bool {
        self.journal.unresumed()
    }

    /// A request the session log shows in flight (the process or the agent stopped in the
    /// middle of it): finish it from its last committed step — its open calls answered from the
    /// log, as interrupted or by running them (`finish_paused`), then the model calls that are
    /// left. Its caller is gone: the answer is committed to the log and published as
    /// [`Event::RequestResumed`], and returned. `None` when no request was in flight.
    pub(super) async fn resume_in_flight(
        &mut self,
        ctx: &AgentContext,
        trace: TraceContext,
    ) -> Option<Result<String, AgentError>> {
        let format = self.journal.take_up_in_flight()?;
        let outcome = self.finish_in_flight(ctx, trace, format.as_ref()).await;
        // Ended: a later failure is of another request.
        self.journal.end_request();
        ctx.events.publish(
            Some(trace.id()),
            Event::RequestResumed {
                agent: ctx.name.clone(),
                answer: outcome.as_ref().ok().cloned(),
                error: outcome.as_ref().err().map(ToString::to_string),
            },
        );
        Some(outcome)
    }

    async fn finish_in_flight(
        &mut self,
        ctx: &AgentContext,
        trace: TraceContext,
        format: Option<&ResponseFormat>,
    ) -> Result<String, AgentError> {
        // A request of its own for the budgets: what it spent before the restart was never
        // counted in this process.
        self.spend.start_request();
        self.finish_paused(ctx, trace.id()).await?;
        let mut req = RequestContext::new(trace);
        // What happened before the restart is kept whatever happens now: a failure rolls back
        // only what the resumed part added.
        req.mark(&self.context.conversation);
        let before = self.before_request();
        let outcome = match self.final_answer_in_log() {
            // The final answer was committed, its close was not: no model call is made again.
            Some(answer) => Ok(answer),
            // A typed ask's calls carry its schema, resumed as when first asked.
            None => self.run_turns(ctx, &mut req, format).await,
        };
        self.close_request(outcome, &mut req, before)
    }

    /// The last message, when it is a model's final answer (an assistant message with no tool
    /// calls).
    fn final_answer_in_log(&self) -> Option<String> {
        self.context
            .conversation
            .messages()
            .last()
            .filter(|m| m.role == Role::Assistant && m.calls().is_empty())
            .map(|m| m.text())
    }
}
