//! The compaction client: the one road every compaction takes from the side that asks for it —
//! an agent's automatic compaction, `/compact`, its `compact` tool, the emergency before a model
//! call, and the CLI's `compact` and `replay`.
//!
//! [`compact`] routes the [`CompactionRequest`] (this team's compression agent, the one on
//! another node, or — when that node cannot be reached — the planner on this node), opens the
//! `compaction` span around it and publishes `CompactionStarted` and then `CompactionFinished`
//! or `CompactionFailed` on the asker's bus, once each on every route (`announce.rs`), with
//! a receipt in the report of every compaction that changed the conversation (`receipt.rs`).
//! An agent calls [`compact_and_apply`], which adds the tracker that lets `/compact` join a running
//! compaction (`tracker.rs`) and applies the answer; an agent working ahead calls
//! [`compact_detached`], the same road announced in mode background, whose answer it awaits on
//! a task of its own and splices in later (`llm_agent/work_ahead.rs`). Either way the agent
//! publishes `CompactionApplied` when it applied or dropped the answer
//! ([`compaction_applied`]).

mod announce;
mod own_node;
mod receipt;
mod tracker;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use serde::{Deserialize, Serialize};
use tracing::Instrument;
use troupe_compaction::{Compaction, CompactionError};
use troupe_protocol::CompactionReport;
use troupe_protocol::trace::semconv;
use troupe_protocol::{CompactionMode, TraceContext};
use troupe_runtime::{AskError, Directory, EventBus};
use troupe_tokens::TokenCounter;

use crate::compression::COMPRESSION_AGENT;
use crate::compression::hooks;
use crate::compression::job::{
    CompactionRequest, CompressorJob, Hurry, ScopeSummaryError, ScopeSummaryRequest,
};
use announce::{Announcement, AnswerTo, compaction_span};
pub(crate) use announce::{NotApplied, Settled, applied as compaction_applied};
use own_node::{compact_here, make_room};
pub(crate) use tracker::CompactionTracker;

/// How long a compaction may take: the compression agent's model loop runs up to its iteration
/// bound of full-prompt calls (minutes on a local model), and the job may first wait in its
/// mailbox behind another agent's compaction.
pub const COMPACTION_TIMEOUT: Duration = Duration::from_secs(600);

/// How long the summary of a closed scope may take: one model call of the compression agent's,
/// which may first wait in its mailbox behind a compaction (up to [`COMPACTION_TIMEOUT`]).
const SCOPE_SUMMARY_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a compaction did not produce a report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionAskError {
    /// The agent is in the middle of a request and no compaction is running to join.
    #[error("cannot compact while responding")]
    Responding,
    /// Fewer than two messages.
    #[error("nothing to compact")]
    NothingToCompact,
    /// The team has no compression agent.
    #[error(
        "the team has no compression agent (spawn it with troupe_agents::spawn_compression_agent)"
    )]
    NoCompressionAgent,
    /// Compaction ran and failed; the conversation is unchanged.
    #[error("compaction failed: {0}")]
    Failed(CompactionError),
    /// The compaction this request joined ended without an outcome (its agent stopped).
    #[error("the running compaction was abandoned")]
    Abandoned,
    /// The caller cancelled it before it was applied; the conversation is unchanged.
    #[error("compaction cancelled; the conversation is unchanged")]
    Cancelled,
    /// The agent or its compression agent could not be reached.
    #[error(transparent)]
    Ask(#[from] AskError),
}

/// The outcome of one compaction as an agent reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedCompaction {
    /// The compaction report.
    pub report: CompactionReport,
    /// The summary text, when a summary was written.
    pub summary: Option<String>,
}

/// Where a compaction is asked from: the asker's team and trace, and the counter a compaction
/// on the asker's own node counts with.
#[derive(Clone, Copy)]
pub struct CompactionCaller<'a> {
    /// The asker's team: where the compression agent is looked up.
    pub directory: &'a Directory,
    /// The asker's bus: the compaction's events go there.
    pub events: &'a EventBus,
    /// The trace of the request that caused the compaction.
    pub trace: TraceContext,
    /// Counts tokens for the announcement and for a compaction on this node.
    pub counter: &'a dyn TokenCounter,
}

impl std::fmt::Debug for CompactionCaller<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionCaller")
            .field("directory", self.directory)
            .field("trace", &self.trace)
            .finish_non_exhaustive()
    }
}

/// Where a compaction goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CompressorRoute {
    /// The team's own compression agent.
    Local,
    /// The compression agent on that node of the cluster.
    Remote(String),
    /// The team is in a cluster and no node has a compression agent: the asker compacts on its
    /// own node with the planner.
    Unreachable,
    /// The asker makes room on its own node with the planner, without a model
    /// ([`InProcess::make_room`](crate::compression::InProcess::make_room)).
    MakeRoom,
}

impl CompressorRoute {
    /// The route from a team with this directory; `None` for a team with no compression agent
    /// that is in no cluster (compaction is refused there, as it always was).
    fn of(directory: &Directory) -> Option<CompressorRoute> {
        if directory.is_live(COMPRESSION_AGENT) {
            Some(CompressorRoute::Local)
        } else if let Some(node) = directory.remote_node_of(COMPRESSION_AGENT) {
            Some(CompressorRoute::Remote(node))
        } else if directory.in_cluster() {
            Some(CompressorRoute::Unreachable)
        } else {
            None
        }
    }

    /// Who compacts, as the `compaction` span names it.
    fn compressor(&self) -> String {
        match self {
            CompressorRoute::Local => COMPRESSION_AGENT.to_string(),
            CompressorRoute::Remote(node) => format!("{COMPRESSION_AGENT}@{node}"),
            CompressorRoute::Unreachable | CompressorRoute::MakeRoom => OWN_NODE.to_string(),
        }
    }
}

/// Whether a compaction from a team with this directory has somewhere to go.
pub(crate) fn can_compact(directory: &Directory) -> bool {
    CompressorRoute::of(directory).is_some()
}

/// The compressor a compaction on the asker's own node is named by.
const OWN_NODE: &str = "planner (this node)";

/// An agent's compaction, start to end: refused when the team has nowhere to compact;
/// registered so that a `/compact` meanwhile joins it; routed, traced and announced as
/// [`compact`] does, in mode blocking; applied with `apply` (which returns what joiners and the
/// caller get), and the wait — all of it — recorded on its span and published as
/// `CompactionApplied`.
pub(crate) async fn compact_and_apply(
    caller: &CompactionCaller<'_>,
    request: CompactionRequest,
    apply: impl FnOnce(Compaction) -> AppliedCompaction,
) -> Result<AppliedCompaction, CompactionAskError> {
    let agent = request.agent.clone();
    let running = CompactionTracker::of(caller.directory).begin(&agent);
    let asked = Instant::now();
    let outcome =
        match Started::announce(caller, request, CompactionMode::Blocking, AnswerTo::Agent) {
            Err(e) => Err(e),
            Ok(started) => {
                let span = started.span.clone();
                let outcome = started.run(caller).await.map(apply);
                let settled = Settled {
                    agent: &agent,
                    mode: CompactionMode::Blocking,
                    waited: asked.elapsed(),
                    outcome: outcome
                        .as_ref()
                        .map(|_| ())
                        .map_err(|e| NotApplied::NoAnswer(e.to_string())),
                };
                compaction_applied(caller.events, caller.trace.id(), &span, settled);
                outcome
            }
        };
    running.settle(&outcome);
    outcome
}

/// Join the compaction of `agent` that is running, if one is (see [`CompactionTracker::join`]).
pub(crate) async fn join_running(
    directory: &Directory,
    agent: &str,
) -> Option<Result<AppliedCompaction, CompactionAskError>> {
    CompactionTracker::of(directory).join(agent).await
}

/// Compact `request` on the route its team has, inside a `compaction` span, announcing it on
/// `caller`'s bus: one `CompactionStarted` (mode blocking), then one `CompactionFinished` or
/// `CompactionFailed` (also when this future is dropped before the end).
///
/// # Errors
/// [`CompactionAskError::NoCompressionAgent`] when the team has no compression agent and is in no
/// cluster; [`CompactionAskError::Failed`] when the compaction failed; [`CompactionAskError::Ask`] when the
/// compression agent could not be asked (a remote one that failed is reported as
/// [`AskError::Remote`]).
pub async fn compact(
    caller: &CompactionCaller<'_>,
    request: CompactionRequest,
) -> Result<Compaction, CompactionAskError> {
    Started::announce(caller, request, CompactionMode::Blocking, AnswerTo::Caller)?
        .run(caller)
        .await
}

/// What a compaction that runs on a task of its own keeps of its asker (see
/// [`compact_detached`]): [`CompactionCaller`], owned.
#[derive(Clone)]
pub(crate) struct OwnedCaller {
    /// The asker's team.
    pub(crate) directory: Directory,
    /// The asker's bus.
    pub(crate) events: EventBus,
    /// The trace of the request whose turn started it.
    pub(crate) trace: TraceContext,
    /// Counts tokens for the announcement and for a compaction on this node.
    pub(crate) counter: Arc<dyn TokenCounter>,
}

impl OwnedCaller {
    fn borrowed(&self) -> CompactionCaller<'_> {
        CompactionCaller {
            directory: &self.directory,
            events: &self.events,
            trace: self.trace,
            counter: self.counter.as_ref(),
        }
    }
}

/// A compaction under way while its asker works on: its `compaction` span, and the answer to
/// await (on a task of its own; it owns everything it needs).
pub(crate) struct Detached {
    /// The compaction's span: the asker records on it how long it waited
    /// ([`compaction_applied`]).
    pub(crate) span: tracing::Span,
    /// The compressor's answer.
    pub(crate) answer: BoxFuture<'static, Result<Compaction, CompactionAskError>>,
}

/// [`compact`] for an agent that works ahead: the same road — route, span, announcements — but
/// announced in mode background, and with the span opened now, in the caller's context, so it
/// is a child of the request whose turn started it wherever the answer is awaited. The asker
/// applies the answer itself and publishes how it took it ([`compaction_applied`]).
///
/// # Errors
/// [`CompactionAskError::NoCompressionAgent`] when the team has nowhere to compact (nothing was
/// announced).
pub(crate) fn compact_detached(
    caller: OwnedCaller,
    request: CompactionRequest,
) -> Result<Detached, CompactionAskError> {
    let started = Started::announce(
        &caller.borrowed(),
        request,
        CompactionMode::Background,
        AnswerTo::Agent,
    )?;
    let span = started.span.clone();
    let answer = Box::pin(async move { started.run(&caller.borrowed()).await });
    Ok(Detached { span, answer })
}

/// A compaction announced (`CompactionStarted`) with its span open, not yet asked.
struct Started {
    route: CompressorRoute,
    request: CompactionRequest,
    span: tracing::Span,
    announcement: Announcement,
}

impl Started {
    /// Route `request`, open its span (a child of the current one) and announce it in `mode`,
    /// its answer going to `answer_to`.
    fn announce(
        caller: &CompactionCaller<'_>,
        request: CompactionRequest,
        mode: CompactionMode,
        answer_to: AnswerTo,
    ) -> Result<Started, CompactionAskError> {
        // A team that has nowhere to compact has opted out of compaction: making room is
        // refused there too.
        let Some(route) = CompressorRoute::of(caller.directory) else {
            return Err(CompactionAskError::NoCompressionAgent);
        };
        let route = if request.in_process.make_room {
            CompressorRoute::MakeRoom
        } else {
            route
        };
        let span = compaction_span(
            &request.agent,
            &route.compressor(),
            request.trigger.as_str(),
        );
        let tokens = request
            .in_process
            .token_cache
            .clone()
            .unwrap_or_default()
            .count_shared(caller.counter, request.conversation.messages())
            .total;
        // Counted once: the compression agent ranks the job by this count too.
        let request = CompactionRequest {
            tokens: Some(tokens),
            ..request
        };
        let announcement = Announcement::start(
            caller.events,
            caller.trace.id(),
            &request.agent,
            tokens,
            request.trigger,
            mode,
            answer_to,
            span.clone(),
        );
        Ok(Started {
            route,
            request,
            span,
            announcement,
        })
    }

    /// Ask the compressor inside the span — the agent's before hook first, which may pin,
    /// add preserve hints or veto (`hooks.rs`) — announce how it ended, and show the agent's
    /// after hook.
    async fn run(self, caller: &CompactionCaller<'_>) -> Result<Compaction, CompactionAskError> {
        let Started {
            route,
            mut request,
            span,
            announcement,
        } = self;
        // The conversation before, for the receipt (shared messages: a cheap copy), taken
        // before the before hook pins anything.
        let before = request.conversation.messages().to_vec();
        let policy = request.policy.clone();
        let hooks = request.in_process.hooks.clone();
        let cache = request.in_process.token_cache.clone();
        let (agent, trigger) = (request.agent.clone(), request.trigger);
        let asked = async {
            match hooks::before(&hooks, &mut request, caller.counter).await? {
                hooks::Before::Vetoed(compaction) => Ok((*compaction, None)),
                hooks::Before::Proceed(asked) => ask_route(caller, route, request)
                    .await
                    .map(|compaction| (compaction, Some(asked))),
            }
        };
        let mut outcome = asked.instrument(span).await.map(|(mut compaction, asked)| {
            if let Some(asked) = asked {
                asked.settle(&mut compaction);
            }
            compaction
        });
        if let Ok(compaction) = &mut outcome {
            receipt::attach_receipt(
                &before,
                &policy,
                (caller.counter, cache.as_ref()),
                compaction,
            );
        }
        announcement.end(outcome.as_ref().map(|c| &c.report));
        if let Ok(compaction) = &outcome {
            hooks::after(&hooks, &agent, trigger, &before, compaction).await;
        }
        outcome
    }
}

/// Ask the compressor `route` names; a remote one that cannot be reached is replaced by the
/// planner on this node.
async fn ask_route(
    caller: &CompactionCaller<'_>,
    route: CompressorRoute,
    request: CompactionRequest,
) -> Result<Compaction, CompactionAskError> {
    let trace = caller.trace.child();
    match route {
        CompressorRoute::Local => caller
            .directory
            .ask_job(
                COMPRESSION_AGENT,
                |reply| CompressorJob::Compact(Box::new(request), reply),
                trace,
                COMPACTION_TIMEOUT,
            )
            .await?
            .map_err(CompactionAskError::Failed),
        CompressorRoute::Remote(node) => {
            let answer = caller
                .directory
                .ask_wire_job(
                    COMPRESSION_AGENT,
                    request.clone(),
                    trace,
                    COMPACTION_TIMEOUT,
                )
                .await;
            match answer {
                Ok(Ok(compaction)) => {
                    let compaction = Compaction::from(compaction);
                    record_remote_summarizer(&request, &compaction.report);
                    Ok(compaction)
                }
                Ok(Err(reason)) => Err(CompactionAskError::Ask(AskError::Remote {
                    node,
                    reason: format!("its compression agent failed: {reason}"),
                })),
                Err(e) => {
                    let why =
                        format!("the compression agent on node `{node}` was not reached: {e}");
                    compact_here(&request, caller.counter, &why).await
                }
            }
        }
        CompressorRoute::Unreachable => {
            let why = "no node of the cluster has a compression agent";
            compact_here(&request, caller.counter, why).await
        }
        CompressorRoute::MakeRoom => make_room(&request, caller.counter).await,
    }
}

/// What another node's summarizer spent for `request`'s agent counts against its budgets. Its
/// calls were made (and traced) there, out of reach of this agent's meter, so the report's
/// counts stand in for them; on this node the summarizer's calls are metered one by one where
/// their `chat` spans end (`compression/task.rs`), and nothing is counted here.
fn record_remote_summarizer(request: &CompactionRequest, report: &CompactionReport) {
    if let Some(spend) = &request.in_process.spend {
        spend.record(troupe_protocol::Usage {
            input_tokens: report.summarizer.input_tokens as u64,
            output_tokens: report.summarizer.output_tokens as u64,
            ..Default::default()
        });
    }
}

/// How long telling the compression agent to hurry may take: it answers from its queue, at once.
const HURRY_TIMEOUT: Duration = Duration::from_secs(10);

/// Tell the compression agent that `agent` now waits for its queued compaction (it reached the
/// trigger while working ahead), with `room` tokens left before its window is full: the job is
/// ranked by that room from now on. The team's own compression agent, or the one on another
/// node its compactions go to (the [`Hurry`] travels as they do). Best effort: one that cannot
/// be asked, or an older node that takes no hurry, is not told (the job keeps its rank).
/// `true` when a queued job was re-ranked.
pub(crate) async fn hurry(
    directory: &Directory,
    trace: TraceContext,
    agent: &str,
    room: i64,
) -> bool {
    match CompressorRoute::of(directory) {
        Some(CompressorRoute::Local | CompressorRoute::Remote(_)) => {}
        // Compacted on this node, or nowhere: no queue to rank it in.
        Some(CompressorRoute::Unreachable | CompressorRoute::MakeRoom) | None => return false,
    }
    let hurry = Hurry {
        agent: agent.to_string(),
        room,
    };
    directory
        .ask_wire_job(COMPRESSION_AGENT, hurry, trace, HURRY_TIMEOUT)
        .await
        .unwrap_or(false)
}

/// Have this team's compression agent summarize a closed scope, inside a `compaction` span
/// (trigger `scope`, the scope's label recorded).
///
/// # Errors
/// [`AskError`] when the compression agent could not be asked.
pub(crate) async fn summarize_scope(
    directory: &Directory,
    trace: TraceContext,
    request: ScopeSummaryRequest,
) -> Result<Result<String, ScopeSummaryError>, AskError> {
    let span = compaction_span(&request.agent, COMPRESSION_AGENT, "scope");
    span.record(semconv::SCOPE, request.label.as_str());
    let answer = directory
        .ask_job(
            COMPRESSION_AGENT,
            |reply| CompressorJob::SummarizeScope(Box::new(request), reply),
            trace,
            SCOPE_SUMMARY_TIMEOUT,
        )
        .instrument(span.clone())
        .await;
    // The agent puts a summary in place of its scope as soon as it has one.
    announce::scope_summarized(&span, answer.as_ref().map(|a| a.as_ref().map(|_| ())));
    answer
}
