//! The context check: where an agent's next request stands against its window, and what the
//! agent does about it — one pure decision, measure in, action out.
//!
//! An agent checks its context before every model call and after every turn and tool batch
//! ([`CheckPoint`]). It measures the request ([`ContextMeasure`]: the conversation's and the
//! tool definitions' tokens, whether a job worked ahead is in flight, whether a tool call is
//! open, whether it already warned) and [`ContextCheck::decide`] answers a [`ContextAction`]: a
//! step ([`ContextStep`]: go on, work ahead, join the job in flight, compact, make room) and what
//! becomes of the warning ([`Warning`]). The agent only carries it out. Every threshold the
//! decision compares with lives here, as tokens of the usable window (the window less the
//! output reserve), taken once from the [`ContextPolicy`]:
//!
//! - the **warning**: after a turn, a request past it is said once per crossing;
//! - the **work-ahead threshold** (the warning by default, the trigger at the latest): with no
//!   job in flight and no tool call open, a snapshot is compacted in the background while the
//!   agent goes on; a job that changed nothing or failed moves it up a quarter of the way from
//!   the warning to the trigger ([`ContextCheck::retry_from`]);
//! - the **trigger**: on the blocking road the agent compacts there and waits; working ahead, a
//!   job must be under way there (one starts if none runs) and the agent still goes on;
//! - the **limit**, the usable window itself: an agent that works ahead and whose next request
//!   would not fit makes room at once without a model, or (told to wait) joins the job in
//!   flight, then compacts if still over.
//!
//! Tool definitions alone past the point where the agent must compact cannot be compacted away:
//! nothing is compacted for them. Far below every threshold the check is quiet whatever the
//! exact count ([`ContextCheck::quiet_below`]): a caller may settle it with an upper bound
//! without tokenizing.

use crate::ContextPolicy;
pub use crate::policy::ContextLevel;

/// Where a check runs in a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckPoint {
    /// Before a model call (the first of a request included): the warning is not touched, and
    /// where the agent must compact it also has to fit the window (an emergency compaction,
    /// else a refusal: the caller's).
    BeforeCall,
    /// After a model turn or a tool batch: the warning is said or re-armed.
    AfterTurn,
}

/// What a check knows about the request it decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextMeasure {
    /// Where the check runs.
    pub point: CheckPoint,
    /// The request's tokens: the conversation's and the tool definitions'.
    pub tokens: usize,
    /// Of those, the tool definitions' — no compaction shrinks them.
    pub tool_tokens: usize,
    /// Whether a job worked ahead is in flight (one at a time).
    pub job_in_flight: bool,
    /// Whether a tool call of the last assistant message still waits for its result: no
    /// snapshot is taken then.
    pub tool_call_open: bool,
    /// Whether the warning for the current crossing of the warning went out.
    pub warned: bool,
    /// A job worked ahead that changed nothing or failed: the next starts only from this size.
    pub retry_from: Option<usize>,
}

/// What the agent does about its context now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextStep {
    /// Nothing to start or wait for: the agent goes on (quiet, when the warning is not said).
    GoOn,
    /// Start a job on a snapshot of the conversation, in the background, and go on.
    WorkAhead,
    /// Wait for the job in flight, splice its answer in, then measure and check again.
    Join,
    /// Compact now through the compression agent, and wait for it.
    Compact,
    /// Make room now on the agent's own node, without a model.
    MakeRoom,
}

/// What becomes of the warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warning {
    /// Left as it is.
    Keep,
    /// Said now: the request crossed the warning (or must compact) and it was not said yet.
    Say,
    /// Re-armed: the request is below the warning, so the next crossing is said again.
    Rearm,
}

/// A check's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextAction {
    /// What to do.
    pub step: ContextStep,
    /// What becomes of the warning; said before the step is taken.
    pub warning: Warning,
}

/// The thresholds an agent's requests are checked against, and how it compacts; built once
/// from its [`ContextPolicy`] and settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextCheck {
    warning: usize,
    trigger: usize,
    usable: usize,
    /// Whether the agent compacts automatically.
    auto: bool,
    /// Where a job worked ahead starts, as configured (the trigger caps it); `None` on the
    /// blocking road.
    work_ahead: Option<usize>,
    /// Working ahead, at the limit: make room without a model (else join the job in flight).
    make_room: bool,
}

impl ContextCheck {
    /// The blocking road: at the trigger the agent compacts (when `auto`) and waits.
    pub fn new(policy: &ContextPolicy, auto: bool) -> Self {
        ContextCheck {
            warning: policy.warning_tokens(),
            trigger: policy.trigger_tokens(),
            usable: policy.usable_tokens(),
            auto,
            work_ahead: None,
            make_room: false,
        }
    }

    /// Working ahead from `from` tokens (the trigger at the latest); at the limit the agent
    /// makes room without a model (`make_room`) or joins the job in flight. An agent that does
    /// not compact automatically does not work ahead: it stays on the blocking road.
    pub fn working_ahead(self, from: usize, make_room: bool) -> Self {
        if !self.auto {
            return self;
        }
        ContextCheck {
            work_ahead: Some(from),
            make_room,
            ..self
        }
    }

    /// Whether the agent compacts ahead of the trigger: then it must compact only at the limit.
    pub fn works_ahead(&self) -> bool {
        self.work_ahead.is_some()
    }

    /// Whether the agent makes room at its limit without a model rather than wait there.
    pub fn makes_room(&self) -> bool {
        self.works_ahead() && self.make_room
    }

    /// Whether a request of `tokens` has reached the trigger.
    pub fn at_trigger(&self, tokens: usize) -> bool {
        tokens >= self.trigger
    }

    /// Whether a request of `tokens` (of which `tool_tokens` are the tool definitions') must
    /// have its compaction before it goes on: at the trigger on the blocking road, at the limit
    /// (it would not fit the usable window) when the agent works ahead. Never when the tool
    /// definitions alone are past that point: no compaction can help then.
    pub fn must_compact(&self, tokens: usize, tool_tokens: usize) -> bool {
        if self.works_ahead() {
            tokens > self.usable && tool_tokens < self.usable
        } else {
            tokens >= self.trigger && tool_tokens < self.trigger
        }
    }

    /// The request size from which a job worked ahead starts — the trigger at the latest, and
    /// not before `retry_from` — or `None` when the agent does not work ahead or a job is in
    /// flight.
    pub fn work_ahead_from(&self, job_in_flight: bool, retry_from: Option<usize>) -> Option<usize> {
        if job_in_flight {
            return None;
        }
        self.work_ahead
            .map(|from| from.min(self.trigger).max(retry_from.unwrap_or(0)))
    }

    /// Where the next job may start after one that started at `started` (request tokens)
    /// changed nothing or failed: a quarter of the way from the warning to the trigger further,
    /// so about three more tries fit before the trigger, not one after every turn.
    pub fn retry_from(&self, started: usize) -> usize {
        let step = self.trigger.saturating_sub(self.warning) / 4;
        started + step.max(1)
    }

    /// Below this many request tokens a check at `point` is quiet — [`ContextStep::GoOn`], the
    /// warning kept before a call and re-armed after a turn — whatever else the measure says
    /// (given the job in flight and `retry_from`): a caller may settle it with an upper bound.
    pub fn quiet_below(
        &self,
        point: CheckPoint,
        job_in_flight: bool,
        retry_from: Option<usize>,
    ) -> usize {
        let ahead = self
            .work_ahead_from(job_in_flight, retry_from)
            .unwrap_or(usize::MAX);
        let quiet = self.trigger.min(ahead);
        match point {
            CheckPoint::BeforeCall => quiet,
            CheckPoint::AfterTurn => quiet.min(self.warning),
        }
    }

    /// The decision: what the agent does about a request measured so.
    pub fn decide(&self, measure: &ContextMeasure) -> ContextAction {
        let ContextMeasure {
            point,
            tokens,
            tool_tokens,
            job_in_flight,
            tool_call_open,
            warned,
            retry_from,
        } = *measure;
        let must = self.must_compact(tokens, tool_tokens);
        let keep = |step| ContextAction {
            step,
            warning: Warning::Keep,
        };
        // Told to wait at the limit, the agent joins the job in flight (never a second) before
        // anything else, then checks again.
        if must && job_in_flight && self.works_ahead() && !self.make_room {
            return keep(ContextStep::Join);
        }
        let ahead = !tool_call_open
            && self
                .work_ahead_from(job_in_flight, retry_from)
                .is_some_and(|from| tokens >= from);
        let compact = if self.makes_room() {
            ContextStep::MakeRoom
        } else {
            ContextStep::Compact
        };
        let step = if !must {
            if ahead {
                ContextStep::WorkAhead
            } else {
                ContextStep::GoOn
            }
        } else if self.auto && (point == CheckPoint::AfterTurn || tool_tokens < self.trigger) {
            compact
        } else {
            ContextStep::GoOn
        };
        let warning = match point {
            CheckPoint::BeforeCall => Warning::Keep,
            CheckPoint::AfterTurn if !must && tokens < self.warning.min(self.trigger) => {
                Warning::Rearm
            }
            CheckPoint::AfterTurn if warned => Warning::Keep,
            CheckPoint::AfterTurn => Warning::Say,
        };
        ContextAction { step, warning }
    }
}

#[cfg(test)]
mod tests;
