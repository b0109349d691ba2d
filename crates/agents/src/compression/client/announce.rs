//! What a compaction shows: its `compaction` span and its three events, opened and published
//! here only, on the asker's side, whatever route the compaction took.

use troupe_protocol::trace::semconv;
use troupe_protocol::{CompactTrigger, CompactionReport};
use troupe_protocol::{CompactionMode, Event, TraceId};
use troupe_runtime::EventBus;

use super::CompactionAskError;
use crate::compression::ScopeSummaryError;
use troupe_runtime::AskError;

/// The `compaction` span of `agent`'s conversation, compacted by `compressor`. Opened by the
/// asker around the whole ask, it is the parent of the compression agent's work (the actor runs
/// a job inside the asker's span): one trace from the request that triggered the compaction down
/// to the compressor's model and tool calls.
pub(crate) fn compaction_span(agent: &str, compressor: &str, trigger: &str) -> tracing::Span {
    tracing::info_span!(
        "compaction",
        { semconv::OPERATION_NAME } = "compaction",
        { semconv::OPENINFERENCE_SPAN_KIND } = "CHAIN",
        { semconv::AGENT_NAME } = %agent,
        { semconv::COMPRESSOR } = %compressor,
        { semconv::TRIGGER } = %trigger,
        { semconv::SCOPE } = tracing::field::Empty,
        { semconv::COMPACTION_TOKENS_BEFORE } = tracing::field::Empty,
        { semconv::COMPACTION_TOKENS_AFTER } = tracing::field::Empty,
        { semconv::COMPACTION_TARGET } = tracing::field::Empty,
        { semconv::COMPACTION_REACHED } = tracing::field::Empty,
        { semconv::COMPACTION_SKIPPED } = tracing::field::Empty,
        { semconv::COMPACTION_TIERS } = tracing::field::Empty,
        { semconv::COMPACTION_REASON } = tracing::field::Empty,
        { semconv::COMPACTION_OUTCOME } = tracing::field::Empty,
        { semconv::COMPACTION_DROPPED } = tracing::field::Empty,
        { semconv::ERROR_TYPE } = tracing::field::Empty,
        { semconv::COMPACTION_SUMMARIZER_CALLS } = tracing::field::Empty,
        { semconv::COMPACTION_MODE } = tracing::field::Empty,
        { semconv::COMPACTION_WAITED_MS } = tracing::field::Empty,
        { semconv::COMPACTION_RECEIPT_CACHED_PREFIX_KEPT } = tracing::field::Empty,
        { semconv::COMPACTION_RECEIPT_TOKENS_REBILLED } = tracing::field::Empty,
        { semconv::COMPACTION_RECEIPT_SUMMARIZER_BILLED } = tracing::field::Empty,
        { semconv::COMPACTION_RECEIPT_EXPECTED_TURNS } = tracing::field::Empty,
        { semconv::COMPACTION_RECEIPT_NET_SAVING } = tracing::field::Empty,
        { semconv::COMPACTION_RECEIPT_PRICING } = tracing::field::Empty,
    )
}

/// How a compaction ended, as its span's `troupe.compaction.outcome` says: recorded once, by
/// whoever decides it — the agent taking the answer ([`applied`]), or the announcement when
/// nobody takes one ([`Announcement::end`], and its drop when cancelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Applied,
    Dropped,
    Answered,
    Failed,
    Cancelled,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Dropped => "dropped",
            Outcome::Answered => "answered",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// Who takes a compaction's answer: the agent whose conversation it is, which then says how it
/// took it ([`applied`]), or the caller alone (a transcript file, an MCP client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnswerTo {
    /// The agent applies the answer, or drops it.
    Agent,
    /// The caller gets the answer; no conversation takes it here.
    Caller,
}

/// Why an agent did not apply a compaction's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotApplied {
    /// The compaction answered, and the agent dropped the answer (stale: why).
    Dropped(String),
    /// The compaction gave no answer (it failed or was cancelled: its span says which).
    NoAnswer(String),
}

impl NotApplied {
    fn reason(self) -> String {
        match self {
            NotApplied::Dropped(why) | NotApplied::NoAnswer(why) => why,
        }
    }
}

/// How the agent took a compaction's answer: [`applied`] publishes it.
pub(crate) struct Settled<'a> {
    /// The agent whose conversation it is.
    pub(crate) agent: &'a str,
    /// Background or blocking.
    pub(crate) mode: CompactionMode,
    /// How long the agent's request was held up by it.
    pub(crate) waited: std::time::Duration,
    /// Applied, or why not.
    pub(crate) outcome: Result<(), NotApplied>,
}

/// The agent applied (or dropped) a compaction's answer: record the wait and the outcome on its
/// `compaction` span (a compaction that gave no answer has its outcome recorded already) and
/// publish `CompactionApplied` on the agent's bus, under the request it happened in.
pub(crate) fn applied(
    events: &EventBus,
    trace: TraceId,
    span: &tracing::Span,
    settled: Settled<'_>,
) {
    let waited_ms = u64::try_from(settled.waited.as_millis()).unwrap_or(u64::MAX);
    span.record(semconv::COMPACTION_WAITED_MS, waited_ms);
    match &settled.outcome {
        Ok(()) => {
            span.record(semconv::COMPACTION_OUTCOME, Outcome::Applied.as_str());
        }
        Err(NotApplied::Dropped(reason)) => {
            span.record(semconv::COMPACTION_OUTCOME, Outcome::Dropped.as_str());
            span.record(semconv::COMPACTION_DROPPED, reason.as_str());
            tracing::info!(parent: span, agent = %settled.agent, %reason, "compaction answer dropped");
        }
        // Failed or cancelled: the announcement recorded which.
        Err(NotApplied::NoAnswer(_)) => {}
    }
    events.publish(
        Some(trace),
        Event::CompactionApplied {
            agent: settled.agent.to_string(),
            mode: settled.mode,
            waited_ms,
            applied: settled.outcome.is_ok(),
            reason: settled.outcome.err().map(NotApplied::reason),
        },
    );
}

/// Record how a scope's summary ended on its `compaction` span: `applied` (its agent puts it in
/// place of the scope at once), or `failed` with why.
pub(crate) fn scope_summarized(
    span: &tracing::Span,
    answer: Result<Result<(), &ScopeSummaryError>, &AskError>,
) {
    let (error_type, reason) = match answer {
        Ok(Ok(())) => {
            span.record(semconv::COMPACTION_OUTCOME, Outcome::Applied.as_str());
            return;
        }
        Ok(Err(e)) => ("scope_summary_failed", e.to_string()),
        Err(e) => ("ask_failed", e.to_string()),
    };
    span.record(semconv::COMPACTION_OUTCOME, Outcome::Failed.as_str());
    span.record(semconv::ERROR_TYPE, error_type);
    span.record(semconv::COMPACTION_REASON, reason.as_str());
}

/// The `error.type` of a compaction that ended in `error`.
fn error_type(error: &CompactionAskError) -> &'static str {
    match error {
        CompactionAskError::Responding => "responding",
        CompactionAskError::NothingToCompact => "nothing_to_compact",
        CompactionAskError::NoCompressionAgent => "no_compression_agent",
        CompactionAskError::Failed(_) => "compaction_failed",
        CompactionAskError::Abandoned => "abandoned",
        CompactionAskError::Cancelled => "cancelled",
        CompactionAskError::Ask(_) => "ask_failed",
    }
}

/// How a compaction that gave no answer ended: cancelled when nobody wanted it any more (its
/// request cancelled or abandoned, or the team shutting down under it — the compression agent
/// stopped before the asker), else failed.
fn outcome_of(error: &CompactionAskError) -> Outcome {
    match error {
        CompactionAskError::Cancelled
        | CompactionAskError::Abandoned
        | CompactionAskError::Ask(AskError::ShutDown) => Outcome::Cancelled,
        _ => Outcome::Failed,
    }
}

/// The mode's name on the span, as `CompactionStarted` serializes it.
fn mode_name(mode: CompactionMode) -> &'static str {
    match mode {
        CompactionMode::Background => "background",
        CompactionMode::Blocking => "blocking",
    }
}

/// Put what a compaction did on its `compaction` span.
fn record_report(span: &tracing::Span, report: &CompactionReport) {
    span.record(semconv::COMPACTION_TOKENS_BEFORE, report.tokens_before);
    span.record(semconv::COMPACTION_TOKENS_AFTER, report.tokens_after);
    span.record(semconv::COMPACTION_TARGET, report.target_tokens);
    span.record(semconv::COMPACTION_REACHED, report.reached);
    span.record(semconv::COMPACTION_SKIPPED, report.skipped);
    span.record(semconv::COMPACTION_TIERS, tiers_used(report).as_str());
    span.record(semconv::COMPACTION_REASON, report.reason.as_str());
    span.record(
        semconv::COMPACTION_SUMMARIZER_CALLS,
        report.summarizer.calls,
    );
    if let Some(receipt) = &report.receipt {
        span.record(
            semconv::COMPACTION_RECEIPT_CACHED_PREFIX_KEPT,
            receipt.cached_prefix_kept,
        );
        span.record(
            semconv::COMPACTION_RECEIPT_TOKENS_REBILLED,
            receipt.rebilled_tokens,
        );
        span.record(
            semconv::COMPACTION_RECEIPT_SUMMARIZER_BILLED,
            receipt.summarizer_billed,
        );
        span.record(
            semconv::COMPACTION_RECEIPT_EXPECTED_TURNS,
            receipt.expected_turns,
        );
        span.record(semconv::COMPACTION_RECEIPT_NET_SAVING, receipt.net_saving);
        span.record(
            semconv::COMPACTION_RECEIPT_PRICING,
            receipt.pricing.as_str(),
        );
    }
}

/// The tiers a compaction used, e.g. `truncate,mask,summarize`; `none` when nothing ran.
fn tiers_used(report: &CompactionReport) -> String {
    let t = &report.tiers;
    let used: Vec<&str> = [
        ("truncate", t.truncated),
        ("mask", t.masked + t.display_only_removed),
        ("summarize", t.per_message_summarized + t.segment_summaries),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(name, _)| name)
    .collect();
    if used.is_empty() {
        "none".into()
    } else {
        used.join(",")
    }
}

/// One compaction's announcements on the asker's bus: [`Announcement::start`] publishes
/// `CompactionStarted`, [`Announcement::end`] `CompactionFinished` or `CompactionFailed`, and a
/// compaction dropped before it ended (cancelled, or its request abandoned) publishes
/// `CompactionFailed` as it goes, so every `Started` has exactly one ending — and its span says
/// which, with the tokens it started from.
pub(crate) struct Announcement {
    events: EventBus,
    trace: TraceId,
    agent: String,
    tokens: usize,
    answer_to: AnswerTo,
    mode: CompactionMode,
    span: tracing::Span,
    ended: bool,
}

impl Announcement {
    /// Announce that `agent`'s conversation, `tokens` long, is being compacted for `trigger`,
    /// in `mode`, its answer going to `answer_to`.
    #[allow(clippy::too_many_arguments)] // One announcement's facts, each its own.
    pub(crate) fn start(
        events: &EventBus,
        trace: TraceId,
        agent: &str,
        tokens: usize,
        trigger: CompactTrigger,
        mode: CompactionMode,
        answer_to: AnswerTo,
        span: tracing::Span,
    ) -> Self {
        span.record(semconv::COMPACTION_MODE, mode_name(mode));
        events.publish(
            Some(trace),
            Event::CompactionStarted {
                agent: agent.to_string(),
                tokens,
                trigger,
                mode,
            },
        );
        Announcement {
            events: events.clone(),
            trace,
            agent: agent.to_string(),
            tokens,
            answer_to,
            mode,
            span,
            ended: false,
        }
    }

    /// Announce how it ended (and record the report on its span, or why there is none).
    pub(crate) fn end(mut self, outcome: Result<&CompactionReport, &CompactionAskError>) {
        self.ended = true;
        let event = match outcome {
            Ok(report) => {
                record_report(&self.span, report);
                if self.answer_to == AnswerTo::Caller {
                    self.span
                        .record(semconv::COMPACTION_OUTCOME, Outcome::Answered.as_str());
                }
                Event::CompactionFinished {
                    agent: self.agent.clone(),
                    report: Box::new(report.clone()),
                    mode: self.mode,
                }
            }
            Err(error) => {
                tracing::warn!(parent: &self.span, agent = %self.agent, %error, "compaction failed");
                self.no_answer(error)
            }
        };
        self.events.publish(Some(self.trace), event);
    }

    /// Record on the span that the compaction ended without an answer (`error`), and the
    /// event that says so.
    fn no_answer(&self, error: &CompactionAskError) -> Event {
        let outcome = outcome_of(error);
        let reason = error.to_string();
        self.span
            .record(semconv::COMPACTION_OUTCOME, outcome.as_str());
        let kind = match outcome {
            Outcome::Cancelled => "cancelled",
            _ => error_type(error),
        };
        self.span.record(semconv::ERROR_TYPE, kind);
        self.span
            .record(semconv::COMPACTION_TOKENS_BEFORE, self.tokens);
        self.span.record(
            semconv::COMPACTION_REASON,
            if outcome == Outcome::Cancelled {
                "cancelled"
            } else {
                reason.as_str()
            },
        );
        Event::CompactionFailed {
            agent: self.agent.clone(),
            reason,
            mode: self.mode,
        }
    }
}

impl Drop for Announcement {
    fn drop(&mut self) {
        if !self.ended {
            // The span says so too: a trace shows how a cancelled compaction ended.
            let event = self.no_answer(&CompactionAskError::Cancelled);
            self.events.publish(Some(self.trace), event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compaction_the_shutdown_ended_is_cancelled_and_a_refused_one_failed() {
        assert_eq!(
            outcome_of(&CompactionAskError::Ask(AskError::ShutDown)),
            Outcome::Cancelled
        );
        assert_eq!(
            outcome_of(&CompactionAskError::Cancelled),
            Outcome::Cancelled
        );
        assert_eq!(
            outcome_of(&CompactionAskError::Abandoned),
            Outcome::Cancelled
        );
        assert_eq!(
            outcome_of(&CompactionAskError::NoCompressionAgent),
            Outcome::Failed
        );
        assert_eq!(outcome_of(&CompactionAskError::Responding), Outcome::Failed);
    }
}
