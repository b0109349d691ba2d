//! One queued job of the compression agent and how it runs: a compaction — the anti-thrash
//! guard for automatic triggers, then the model's tool loop over the four compression tools,
//! then the deterministic planner for whatever is left — or a scope summary.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use tracing::Instrument;
use troupe_compaction::summary::{MechanicalSummarizer, Summarizer};
use troupe_compaction::{CompactOptions, Compaction, CompactionError, ThrashGuard, compact_with};
use troupe_protocol::sync::lock;
use troupe_protocol::{ChatModel, TraceContext};
use troupe_runtime::{EventBus, Reply};

use crate::TracedModel;
use crate::compression::config::{CompressionConfig, CompressorModel};
use crate::compression::job::{CompactionRequest, ScopeSummaryError, ScopeSummaryRequest};
use crate::compression::model_loop::ModelSteering;
use crate::compression::schedule::Urgency;
use crate::compression::scope::summarize_scope;
use crate::compression::summarizer::ModelSummarizer;
use crate::compression::workers::Task;

/// What every job of one compression agent shares.
pub(crate) struct Compressor {
    pub(crate) config: CompressionConfig,
    /// Anti-thrash memory per conversation: automatic triggers wait for enough new tokens.
    /// (One job of an agent runs at a time, so its guard is read and recorded in turn.)
    pub(crate) guards: Mutex<HashMap<String, ThrashGuard>>,
    /// The compression agent's name (its `chat` spans carry it).
    pub(crate) name: String,
    pub(crate) events: EventBus,
}

/// A job waiting for a worker.
pub(crate) struct CompressorTask {
    work: Work,
    compressor: Arc<Compressor>,
    /// The asker's `compaction` span: the job runs inside it wherever a worker takes it.
    span: tracing::Span,
    trace: TraceContext,
}

enum Work {
    Compact {
        /// Boxed: a request is many times the size of a scope's.
        request: Box<CompactionRequest>,
        reply: Reply<Result<Compaction, CompactionError>>,
        /// Tokens left to the hard limit when it was asked.
        room: i64,
    },
    Scope(
        Box<ScopeSummaryRequest>,
        Reply<Result<String, ScopeSummaryError>>,
    ),
}

impl CompressorTask {
    /// A compaction, its urgency from the asker's count of the conversation's tokens, else
    /// counted now (with the asker's warm token cache when it sent one): its room is the
    /// context window less those tokens.
    pub(crate) fn compact(
        compressor: Arc<Compressor>,
        request: Box<CompactionRequest>,
        reply: Reply<Result<Compaction, CompactionError>>,
        trace: TraceContext,
    ) -> Self {
        let tokens = request.tokens.unwrap_or_else(|| {
            request
                .in_process
                .token_cache
                .clone()
                .unwrap_or_default()
                .count_shared(
                    compressor.config.counter.as_ref(),
                    request.conversation.messages(),
                )
                .total
        });
        let room = signed(request.policy.context_window) - signed(tokens);
        CompressorTask {
            work: Work::Compact {
                request,
                reply,
                room,
            },
            compressor,
            span: tracing::Span::current(),
            trace,
        }
    }

    /// A scope summary.
    pub(crate) fn scope(
        compressor: Arc<Compressor>,
        request: Box<ScopeSummaryRequest>,
        reply: Reply<Result<String, ScopeSummaryError>>,
        trace: TraceContext,
    ) -> Self {
        CompressorTask {
            work: Work::Scope(request, reply),
            compressor,
            span: tracing::Span::current(),
            trace,
        }
    }
}

fn signed(tokens: usize) -> i64 {
    i64::try_from(tokens).unwrap_or(i64::MAX)
}

impl Task for CompressorTask {
    fn agent(&self) -> &str {
        match &self.work {
            Work::Compact { request, .. } => &request.agent,
            Work::Scope(request, _) => &request.agent,
        }
    }

    fn urgency(&self) -> Urgency {
        match &self.work {
            Work::Compact { request, room, .. } => Urgency::compaction(request.trigger, *room),
            Work::Scope(..) => Urgency::scope(),
        }
    }

    fn replaceable(&self) -> bool {
        matches!(self.work, Work::Compact { .. })
    }

    /// The newer compaction keeps what a person or an emergency asked of the older one: its
    /// trigger when the older's is never held back by the anti-thrash guard and its own is,
    /// and its focus when it has none.
    fn take_place_of(&mut self, older: &Self) {
        let (
            Work::Compact { request, .. },
            Work::Compact {
                request: before, ..
            },
        ) = (&mut self.work, &older.work)
        else {
            return;
        };
        if request.trigger.is_rate_limited() && !before.trigger.is_rate_limited() {
            request.trigger = before.trigger;
        }
        if request.focus.is_none() {
            request.focus.clone_from(&before.focus);
        }
    }

    fn superseded(self) {
        match self.work {
            Work::Compact { request, reply, .. } => {
                reply.send(Err(CompactionError::Superseded {
                    agent: request.agent,
                }));
            }
            // Never replaced (not `replaceable`): dropping the port tells the asker.
            Work::Scope(..) => {}
        }
    }

    fn run(self) -> BoxFuture<'static, ()> {
        let CompressorTask {
            work,
            compressor,
            span,
            trace,
        } = self;
        async move {
            match work {
                Work::Compact { request, reply, .. } => {
                    let agent = request.agent.clone();
                    let compaction = compact(&compressor, *request, &trace);
                    answer_unless_abandoned(reply, compaction, &agent).await;
                }
                Work::Scope(request, reply) => {
                    let summary = summarize_scope(&request, &compressor.name);
                    answer_unless_abandoned(reply, summary, &request.agent).await;
                }
            }
        }
        .instrument(span)
        .boxed()
    }
}

/// Answer `reply` with what `work` gives — unless the asker stops waiting first (an agent that
/// made room at its limit dropped the job it had worked ahead, an ask that timed out): then
/// the work stops where it is, its model call with it, and the worker is free for the next
/// job instead of summarizing for nobody (on the embedded model, beside the agents' own
/// calls). A job from another node cannot be watched so, and runs to its end.
async fn answer_unless_abandoned<T: Send + 'static>(
    mut reply: Reply<T>,
    work: impl Future<Output = T>,
    agent: &str,
) {
    let abandoned = reply.abandoned();
    tokio::select! {
        answer = work => reply.send(answer),
        () = abandoned => {
            tracing::debug!(%agent, "the asker stopped waiting: the job stopped unanswered");
        }
    }
}

/// Run one compaction. The asker's compaction client opened its `compaction` span (the job
/// runs inside it) and announces it; this adds the model's steering, the anti-thrash guard and
/// the summarizer's fallbacks.
async fn compact(
    compressor: &Compressor,
    request: CompactionRequest,
    trace: &TraceContext,
) -> Result<Compaction, CompactionError> {
    let config = &compressor.config;
    let agent_model = request.in_process.agent_model.as_ref();
    let model: Option<Arc<dyn ChatModel>> = config.model.pick(agent_model).map(|m| {
        // The summarizer's calls are spend like the asking agent's own: each is metered
        // into its budget where its `chat` span ends, as the agent's calls are.
        let traced =
            TracedModel::new(m, compressor.name.clone()).metered(request.in_process.spend.clone());
        Arc::new(traced) as Arc<dyn ChatModel>
    });
    // The agent's own model holds the agent's prompt in its cache: its summaries continue it.
    let agents_own = agent_model.is_some()
        && matches!(
            config.model,
            CompressorModel::AgentsOwn | CompressorModel::AgentsOwnOr(_)
        );
    let model_summarizer = model.clone().map(|m| {
        let summarizer = ModelSummarizer::new(m);
        if agents_own {
            summarizer.with_agent_prompt(request.in_process.agent_tools.clone())
        } else {
            summarizer
        }
    });
    let mechanical = MechanicalSummarizer::new();
    let summarizer: &dyn Summarizer = match &model_summarizer {
        Some(s) => s,
        None => &mechanical,
    };
    let asked = CompactOptions {
        guard: lock(&compressor.guards).get(&request.agent).copied(),
        ..request.compact_options()
    };
    let steering = ModelSteering {
        model,
        compressor: compressor.name.clone(),
        agent: request.agent.clone(),
        trace_id: trace.id(),
        events: compressor.events.clone(),
        max_iterations: config.max_iterations,
    };
    let result = compact_with(
        &request.conversation,
        &request.ledger,
        &request.policy,
        config.counter.as_ref(),
        Some(summarizer),
        asked,
        &steering,
    )
    .await;
    match result {
        Ok(mut compaction) => {
            if let Some(s) = &model_summarizer {
                compaction.report.fallbacks.extend(s.take_fallbacks());
            }
            lock(&compressor.guards)
                .entry(request.agent.clone())
                .or_default()
                .record(&compaction.report);
            Ok(compaction)
        }
        Err(e) => {
            tracing::warn!(agent = %request.agent, error = %e, "compaction failed");
            Err(e)
        }
    }
}
