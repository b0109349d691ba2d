//! Work ahead: the agent has its conversation compacted before the trigger, while it goes on.
//!
//! At a turn boundary with no tool call open, a request (messages and tool definitions,
//! measured as at the trigger, against the usable window) past the work-ahead threshold
//! ([`WorkAhead`](crate::WorkAhead)) has a snapshot of the conversation compacted on a task of
//! its own — the compaction client's one road, announced in mode background
//! (`compression/client.rs`, `compact_detached`) — and the agent goes on. The answer is spliced
//! in at a later turn boundary ([`Splice`]: the compacted prefix replaces the snapshot's
//! messages, what was appended since stays as it is, the invariants are checked on the result),
//! or dropped, with its reason, when it is stale: the conversation was cleared, resumed from
//! another log, or rewritten by another compaction (`/compact`, the `compact` tool, an
//! emergency) or a closed scope since — each bumps the epoch — or it was rewound (it no longer
//! starts with the snapshot).
//!
//! The agent never waits at the trigger: that is where a job must be under way (one starts
//! there if none runs, say when one step crossed the warning and the trigger together). The
//! limit is where the next request would not fit the window — one step outran the job (a large
//! file read at a small window). There the agent makes room at once on its own node without a
//! model ([`AtLimit::MakeRoom`], the default: `compression/client/own_node.rs`), and the job in
//! flight, stale now, is cancelled and dropped; or, told to wait ([`AtLimit::Wait`]), it joins
//! the job in flight (never a second one), and compacts blocking if the request still does not
//! fit or none was in flight. The stall eval measured every wait of the background road at
//! those two points before.
//!
//! A job takes turns to land, and the minimum-gain rule is told how many ([`Lead`]: as many as
//! the last job that ran took, unknown before the first), so it weighs whether the window needs
//! the compaction where the answer lands: a job it declined would otherwise start again only one
//! turn from the limit, and be waited for there.
//!
//! At shutdown the job is landed if its answer came, else cancelled (`WorkAheadState::stop`).
//!
//! A crash loses nothing: the job's answer is only ever applied by the agent that asked for it
//! (the pending job dies with it, and its task is aborted); the restarted agent has its
//! checkpoint's conversation and starts over.
//!
//! [`AtLimit::MakeRoom`]: crate::AtLimit::MakeRoom
//! [`AtLimit::Wait`]: crate::AtLimit::Wait

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::task::JoinHandle;
use troupe_compaction::Compaction;
use troupe_compaction::economics::Lead;
use troupe_protocol::{ChatMessage, CompactionMode, ConversationMark, Role};
use troupe_runtime::AgentContext;

use super::context::Context;
use super::context::InFlightCompaction;
use super::request::RequestContext;
use crate::compression::CompactionRequest;
use crate::compression::client::{
    CompactionAskError, NotApplied, OwnedCaller, Settled, compact_detached, compaction_applied,
    hurry,
};

/// A compaction running ahead of the trigger.
pub(super) struct Pending {
    /// The messages compacted: the conversation must still start with them to take the answer.
    snapshot: Vec<Arc<ChatMessage>>,
    /// The snapshot's tokens.
    tokens: usize,
    /// The request's size when it started (messages and tools).
    request_tokens: usize,
    /// The epoch it was started in ([`WorkAheadState::epoch`]).
    epoch: u64,
    /// The job's task: its output is the compressor's answer.
    answer: JoinHandle<Result<Compaction, CompactionAskError>>,
    started: Instant,
    /// The job's `compaction` span: the wait is recorded there when the answer is taken.
    span: tracing::Span,
    /// The conversation before and after the ids loaned to the compaction: an answer that is
    /// not spliced in gives them back when nothing was added since, so a job that changed
    /// nothing leaves no gap in the ids (a log loaded back counts on none).
    loan: (ConversationMark, ConversationMark),
}

/// A pending job that is dropped unapplied (stale, or its agent crashed) has nobody to answer:
/// its task stops (and announces that the compaction was cancelled).
impl Drop for Pending {
    fn drop(&mut self) {
        self.answer.abort();
    }
}

/// The agent's side of working ahead.
#[derive(Default)]
pub(super) struct WorkAheadState {
    /// The job in flight, if any (one at a time).
    pending: Option<Pending>,
    /// Counts the rewrites of the conversation other than a splice: an answer started in an
    /// older epoch is stale.
    epoch: u64,
    /// Why the epoch last changed (the reason a stale answer is dropped with).
    why: String,
    /// A job answered that there was nothing to do (the anti-thrash guard: too little new
    /// material yet), or failed: the next one starts only once the request has grown to this
    /// size (a step past the last one's), so a skipped job is retried before the trigger
    /// instead of leaving the trigger to compact blocking, yet not after every turn.
    retry_from: Option<usize>,
    /// How many turns the last job that ran took to land (`None`: none has yet): the next job
    /// tells the minimum-gain rule, which judges whether the window needs it where its answer
    /// will land rather than where it starts ([`Lead`]).
    lead: Option<u32>,
}

impl WorkAheadState {
    /// The conversation was rewritten (`why`): a job in flight is stale, and a new one may run.
    pub(super) fn rewritten(&mut self, why: &str) {
        self.epoch += 1;
        self.why = why.to_string();
        self.retry_from = None;
    }

    /// A compaction changed the conversation: a new job may run once it grows again.
    pub(super) fn compacted(&mut self) {
        self.retry_from = None;
    }

    /// The job in flight, as `/context` shows it.
    pub(super) fn in_flight(&self) -> Option<InFlightCompaction> {
        self.pending.as_ref().map(|p| InFlightCompaction {
            messages: p.snapshot.len(),
            tokens: p.tokens,
            age_ms: u64::try_from(p.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// Whether a job is in flight.
    pub(super) fn running(&self) -> bool {
        self.pending.is_some()
    }

    /// The request size the next job waits for, after one that changed nothing or failed.
    pub(super) fn retry_from(&self) -> Option<usize> {
        self.retry_from
    }

    /// Why `pending` is stale, if it is.
    fn stale(&self, pending: &Pending) -> Option<String> {
        (pending.epoch != self.epoch).then(|| format!("stale: {}", self.why))
    }
}

/// How many ids a compaction of `messages` messages may hand out: every summary or stub
/// replaces at least one message, and a message is replaced at most once per tier.
fn id_loan(messages: usize) -> usize {
    4 * messages + 64
}

/// The turns `pending` took to land: the model turns taken since its snapshot, plus the one
/// its answer goes in before. When the agent had to wait for it (`waited`), the turns it would
/// have needed are scaled up by the share of the job's time spent waiting; `None` when it was
/// waited for before any turn went by (nothing says how long a turn takes).
fn lead_turns(pending: &Pending, now: &[Arc<ChatMessage>], waited: Duration) -> Option<u32> {
    let taken = now
        .get(pending.snapshot.len()..)
        .unwrap_or_default()
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    let turns = taken as f64 + 1.0;
    let total = pending.started.elapsed().as_secs_f64();
    let going_on = total - waited.as_secs_f64();
    let needed = if waited.is_zero() {
        turns
    } else if taken == 0 || going_on <= 0.0 {
        return None;
    } else {
        (turns * total / going_on).ceil()
    };
    // A bound far beyond any window's turns: one slow job does not make every later one
    // unweighable for good.
    Some(needed.min(f64::from(MAX_LEAD_TURNS)) as u32)
}

/// The largest lead a job is measured to have.
const MAX_LEAD_TURNS: u32 = 256;

/// Whether the last assistant message that called tools still waits for a result.
pub(super) fn has_open_tool_calls(messages: &[Arc<ChatMessage>]) -> bool {
    let Some(at) = messages
        .iter()
        .rposition(|m| m.role == Role::Assistant && !m.calls().is_empty())
    else {
        return false;
    };
    let answered: Vec<&str> = messages[at + 1..]
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    messages[at]
        .calls()
        .iter()
        .any(|call| !answered.contains(&call.id.as_str()))
}

impl WorkAheadState {
    /// Start `request`, the compaction of the conversation as it is now, in the background,
    /// telling it the job's lead, and go on: the request of `request_tokens` (messages and
    /// tools) reached the work-ahead threshold (`LlmAgent::work_ahead`).
    pub(super) fn start(
        &mut self,
        request: CompactionRequest,
        request_tokens: usize,
        context: &mut Context,
        ctx: &AgentContext,
        req: &RequestContext,
    ) {
        let request = CompactionRequest {
            lead: self.lead.map_or(Lead::Unknown, Lead::Turns),
            ..request
        };
        let caller = OwnedCaller {
            directory: ctx.directory.clone(),
            events: ctx.events.clone(),
            trace: req.trace,
            counter: context.counter.clone(),
        };
        // Announced and its span opened here, under the request whose turn starts it.
        let detached = match compact_detached(caller, request) {
            Ok(detached) => detached,
            Err(e) => {
                tracing::warn!(agent = %ctx.name, error = %e, "background compaction did not start");
                return;
            }
        };
        let snapshot = context.conversation.messages().to_vec();
        let before_loan = context.conversation.mark();
        // The compaction names its summaries and stubs from the snapshot's next id on: the
        // conversation skips past them, so what is appended meanwhile never shares an id.
        for _ in 0..id_loan(snapshot.len()) {
            context.conversation.allocate_id();
        }
        let loan = (before_loan, context.conversation.mark());
        let answer = tokio::spawn(detached.answer);
        self.pending = Some(Pending {
            loan,
            tokens: context.tokens(),
            request_tokens,
            snapshot,
            epoch: self.epoch,
            answer,
            started: Instant::now(),
            span: detached.span,
        });
    }

    /// At a turn boundary: take the answer of the job in flight if it has come (never waiting)
    /// and splice it in, or drop the job at once if it is stale.
    pub(super) fn land(
        &mut self,
        context: &mut Context,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) {
        let epoch = self.epoch;
        let Some(pending) = &mut self.pending else {
            return;
        };
        let answer = if pending.answer.is_finished() {
            // Finished: ready at once. A task that panicked or was aborted has no answer.
            (&mut pending.answer).now_or_never().and_then(Result::ok)
        } else if pending.epoch != epoch {
            None
        } else {
            return;
        };
        if let Some(pending) = self.pending.take() {
            self.settle(pending, answer, Duration::ZERO, context, ctx, req);
        }
    }

    /// At the limit with a job in flight, for an agent that waits there ([`AtLimit::Wait`]), as
    /// the context check decides ([`ContextStep::Join`]): wait for it (joining it rather than
    /// starting a second) and splice it in. One that makes room instead
    /// ([`AtLimit::MakeRoom`]) does not wait: the compaction it makes drops the job as stale.
    ///
    /// [`AtLimit::MakeRoom`]: crate::AtLimit::MakeRoom
    /// [`AtLimit::Wait`]: crate::AtLimit::Wait
    /// [`ContextStep::Join`]: troupe_compaction::context_check::ContextStep::Join
    pub(super) async fn join(
        &mut self,
        context: &mut Context,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) {
        let Some(mut pending) = self.pending.take() else {
            return;
        };
        let waiting = Instant::now();
        let answer = if self.stale(&pending).is_some() {
            None
        } else {
            // Still queued behind other agents' jobs, it is ranked by the room left now.
            let room = context.policy.usable_tokens() as i64 - context.tokens() as i64;
            hurry(&ctx.directory, req.trace.child(), &ctx.name, room).await;
            (&mut pending.answer).await.ok()
        };
        self.settle(pending, answer, waiting.elapsed(), context, ctx, req);
    }

    /// The agent stops (team shutdown), between requests: an answer that has come is spliced
    /// in as at a turn boundary, and a job still running is cancelled — its answer would have
    /// no turn boundary left to land at, and waiting for it (minutes on a local model) would
    /// outlast the shutdown grace. Its task has ended before this returns, so its
    /// `compaction` span ends and its `CompactionFailed` (cancelled) is published, not left
    /// open past the trace's flush; the conversation is as the last request left it.
    pub(super) async fn stop(
        &mut self,
        context: &mut Context,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) {
        self.land(context, ctx, req);
        if let Some(pending) = self.pending.take() {
            self.cancel(pending, context, ctx, req).await;
        }
    }

    /// The conversation was rewritten by another compaction: a job in flight is stale, and is
    /// cancelled and dropped now rather than at the next turn boundary (its summarizer would
    /// run on for nothing meanwhile).
    pub(super) async fn drop_stale(
        &mut self,
        context: &mut Context,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) {
        let stale = self
            .pending
            .as_ref()
            .is_some_and(|pending| self.stale(pending).is_some());
        if stale && let Some(pending) = self.pending.take() {
            self.cancel(pending, context, ctx, req).await;
        }
    }

    /// Cancel `pending`'s task and settle it. Its task has ended before the settling, so its
    /// `CompactionFailed` (cancelled) comes before the `CompactionApplied` that drops it, as
    /// every compaction's events come: started, finished or failed, applied.
    async fn cancel(
        &mut self,
        mut pending: Pending,
        context: &mut Context,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) {
        pending.answer.abort();
        // Ended, not only told to end: the join returns once the task dropped the
        // compaction's future; one that finished just before the abort gives its answer.
        let answer = (&mut pending.answer)
            .await
            .unwrap_or(Err(CompactionAskError::Cancelled));
        self.settle(pending, Some(answer), Duration::ZERO, context, ctx, req);
    }

    /// Splice `answer` in or drop it, and say which (`CompactionApplied`, and the wait on the
    /// job's span: `waited` plus the splice).
    fn settle(
        &mut self,
        pending: Pending,
        answer: Option<Result<Compaction, CompactionAskError>>,
        waited: Duration,
        context: &mut Context,
        ctx: &AgentContext,
        req: &mut RequestContext,
    ) {
        let splicing = Instant::now();
        // Measured before the splice replaces the snapshot's messages.
        let lead = lead_turns(&pending, context.conversation.messages(), waited);
        let outcome = self.splice_in(&pending, answer, context, req);
        let spliced = matches!(outcome, Ok(true));
        if spliced && lead.is_some() {
            // Only a job that ran says how long one takes: a declined or skipped one answers
            // at once.
            self.lead = lead;
        }
        let outcome = outcome.map(|_| ());
        if !spliced && context.conversation.mark() == pending.loan.1 {
            // Nothing took an id since the loan: hand the compaction's ids back.
            context.conversation.rewind(pending.loan.0);
        }
        let settled = Settled {
            agent: &ctx.name,
            mode: CompactionMode::Background,
            waited: waited + splicing.elapsed(),
            outcome,
        };
        compaction_applied(&ctx.events, req.trace.id(), &pending.span, settled);
    }

    /// Whether the answer was spliced into the conversation (`false`: it changed nothing), or
    /// why not (the conversation is then unchanged): dropped as stale, or no answer came.
    fn splice_in(
        &mut self,
        pending: &Pending,
        answer: Option<Result<Compaction, CompactionAskError>>,
        context: &mut Context,
        req: &mut RequestContext,
    ) -> Result<bool, NotApplied> {
        let compaction = match (answer, self.stale(pending)) {
            (Some(Ok(_)), Some(stale)) => return Err(NotApplied::Dropped(stale)),
            // Stale and unanswered: its task is cancelled, which its span says.
            (_, Some(stale)) => return Err(NotApplied::NoAnswer(stale)),
            (Some(Ok(compaction)), None) => compaction,
            (Some(Err(e)), None) => {
                self.retry_from = Some(context.check.retry_from(pending.request_tokens));
                return Err(NotApplied::NoAnswer(e.to_string()));
            }
            (None, None) => {
                self.retry_from = Some(context.check.retry_from(pending.request_tokens));
                return Err(NotApplied::NoAnswer(
                    "the background compaction ended without an answer".into(),
                ));
            }
        };
        if !compaction.changed() {
            // Nothing to do (under target, or the anti-thrash guard said no): the next job
            // waits for the request to grow a step.
            self.retry_from = Some(context.check.retry_from(pending.request_tokens));
            context.last_compaction = Some(compaction.report);
            return Ok(false);
        }
        context
            .splice(&pending.snapshot, compaction, req)
            .map_err(|e| NotApplied::Dropped(format!("stale: {e}")))?;
        self.compacted();
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
