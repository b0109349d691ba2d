//! The typed jobs an [`LlmAgent`](crate::LlmAgent) takes between requests — `/compact`, opening
//! and closing a scope, `/context` — the functions that send them by name, what they answer,
//! and the team-wide tracker that lets a manual compaction join a running one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use troupe_compaction::{CompactionError, CompactionReport};
use troupe_runtime::{ChatModel, Directory, Job, Team, TraceContext};

use crate::compression::{COMPRESSION_AGENT, ScopeSummaryError};
use crate::llm_agent::ContextStats;

/// How long an agent waits for the compression agent.
pub const COMPACTION_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a compaction request did not produce a report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    /// The agent is in the middle of a turn and no compaction is running to join.
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
    /// Scoped compression with no model given and none used before.
    #[error("compress requires a model but none declared")]
    NoModel,
    /// No open scope to close.
    #[error("no open scope to compress")]
    NoScope,
    /// Compaction ran and failed; the conversation is unchanged.
    #[error("compaction failed: {0}")]
    Failed(CompactionError),
    /// The closed scope could not be summarized; the conversation is unchanged.
    #[error("compressing the scope failed: {0}")]
    Scope(ScopeSummaryError),
    /// The compaction this request joined ended without an outcome (its agent stopped).
    #[error("the running compaction was abandoned")]
    Abandoned,
    /// The caller cancelled it before it was applied; the conversation is unchanged.
    #[error("compaction cancelled; the conversation is unchanged")]
    Cancelled,
    /// The agent could not be reached.
    #[error(transparent)]
    Ask(#[from] troupe_runtime::AskError),
}

/// The outcome of one compaction as an agent reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedCompaction {
    /// The compaction report.
    pub report: CompactionReport,
    /// The summary text, when a summary was written.
    pub summary: Option<String>,
}

type Shared = watch::Receiver<Option<Result<AppliedCompaction, CompactError>>>;

/// Team-wide record of running compactions, so a manual request joins instead of racing.
#[derive(Default)]
pub(crate) struct CompactionTracker {
    in_flight: Mutex<HashMap<String, Shared>>,
}

impl CompactionTracker {
    pub(crate) fn of(directory: &Directory) -> Arc<CompactionTracker> {
        directory.extension(CompactionTracker::default)
    }

    /// Register a compaction of `agent`; the returned sender publishes its outcome.
    pub(crate) fn begin(
        &self,
        agent: &str,
    ) -> watch::Sender<Option<Result<AppliedCompaction, CompactError>>> {
        let (tx, rx) = watch::channel(None);
        self.lock().insert(agent.to_string(), rx);
        tx
    }

    pub(crate) fn end(&self, agent: &str) {
        self.lock().remove(agent);
    }

    fn running(&self, agent: &str) -> Option<Shared> {
        self.lock().get(agent).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Shared>> {
        troupe_runtime::sync::lock(&self.in_flight)
    }
}

/// `/compact [instructions]`: a job an [`LlmAgent`](crate::LlmAgent) takes between requests.
#[derive(Debug, Clone, Default)]
pub struct CompactNow {
    /// Custom instructions / focus.
    pub instructions: Option<String>,
    /// Cancelling it abandons the compaction while it runs (the compressor's answer is then
    /// dropped, the conversation unchanged) and answers [`CompactError::Cancelled`]; once the
    /// result is applied it is too late. The default token is never cancelled.
    pub cancel: tokio_util::sync::CancellationToken,
}

impl Job for CompactNow {
    type Reply = Result<AppliedCompaction, CompactError>;
}

/// Open a scope: everything from here on belongs to it until it is closed.
#[derive(Debug, Clone)]
pub struct OpenScope {
    /// The scope's label.
    pub label: String,
}

impl Job for OpenScope {
    type Reply = Result<(), CompactError>;
}

/// Close the innermost open scope, replacing its messages by one summary between markers.
#[derive(Clone)]
pub struct CloseScope {
    /// What the summary should keep.
    pub prompt: Option<String>,
    /// The model that writes it (else the last one used for a scope, else an error).
    pub model: Option<Arc<dyn ChatModel>>,
}

impl std::fmt::Debug for CloseScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloseScope")
            .field("prompt", &self.prompt)
            .field("model", &self.model.as_ref().map(|m| m.info().name))
            .finish()
    }
}

impl Job for CloseScope {
    /// The summary, or `None` when the scope was empty and skipped.
    type Reply = Result<Option<String>, CompactError>;
}

/// `/clear`: forget the conversation, its file ledger and last report, and record the fresh
/// start in the session log (loading it then starts from there). The archive is kept.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClearConversation;

impl Job for ClearConversation {
    /// `Err` when the session log could not be written; the conversation is then unchanged.
    type Reply = Result<(), crate::session::SessionError>;
}

/// `/resume SESSION`: continue from another session log. The agent writes its last turn boundary
/// to the log it has, takes the other log's lock, loads it and lets go of the old one; from then
/// on it (and any restart of it) keeps the new log. Switching to the log it already keeps
/// reloads it.
#[derive(Debug, Clone)]
pub struct SwitchSession {
    /// The session log to continue from (created when missing).
    pub path: std::path::PathBuf,
}

impl Job for SwitchSession {
    /// The number of messages restored, or why the agent stays on its current log (then nothing
    /// changed: not its conversation, not its log).
    type Reply = Result<usize, SwitchError>;
}

/// Context statistics (`/context`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ContextQuery;

impl Job for ContextQuery {
    type Reply = ContextStats;
}

/// Where an agent's compaction goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CompressorRoute {
    /// The team's own compression agent.
    Local,
    /// The compression agent on that node of the cluster.
    Remote(String),
    /// The team is in a cluster and no node has a compression agent: the agent compacts on its
    /// own node with the planner.
    Unreachable,
}

impl CompressorRoute {
    /// The route from a team with this directory; `None` for a team with no compression agent
    /// that is in no cluster (compaction is refused there, as it always was).
    pub(crate) fn of(directory: &Directory) -> Option<CompressorRoute> {
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
}

async fn ask_agent_job<J: Job>(team: &Team, agent: &str, job: J) -> Result<J::Reply, CompactError> {
    Ok(team
        .directory()
        .ask_job(agent, job, TraceContext::new_root(), COMPACTION_TIMEOUT)
        .await?)
}

/// `/compact [instructions]` on `agent`: refused while it is responding (unless a compaction is
/// running, which this request then joins), "nothing to compact" below two messages.
pub async fn compact_agent(
    team: &Team,
    agent: &str,
    instructions: Option<String>,
) -> Result<AppliedCompaction, CompactError> {
    let cancel = tokio_util::sync::CancellationToken::new();
    compact_agent_cancellable(team, agent, instructions, cancel).await
}

/// [`compact_agent`] that `cancel` can stop (`/compact` interrupted by Ctrl-C): a compaction
/// this request started answers [`CompactError::Cancelled`] and leaves the conversation as it
/// was. Joining one that is already running is not cancellable (it is not this request's).
pub async fn compact_agent_cancellable(
    team: &Team,
    agent: &str,
    instructions: Option<String>,
    cancel: tokio_util::sync::CancellationToken,
) -> Result<AppliedCompaction, CompactError> {
    if CompressorRoute::of(team.directory()).is_none() {
        return Err(CompactError::NoCompressionAgent);
    }
    if team.is_responding(agent) {
        let Some(mut running) = CompactionTracker::of(team.directory()).running(agent) else {
            return Err(CompactError::Responding);
        };
        // Join the compaction already under way instead of starting a second one.
        let outcome = running
            .wait_for(Option::is_some)
            .await
            .map_err(|_| CompactError::Abandoned)?
            .clone();
        return outcome.unwrap_or(Err(CompactError::Abandoned));
    }
    ask_agent_job(
        team,
        agent,
        CompactNow {
            instructions,
            cancel,
        },
    )
    .await?
}

/// Open a scope on `agent` (seed 000's scoped compression).
pub async fn open_scope(
    team: &Team,
    agent: &str,
    label: impl Into<String>,
) -> Result<(), CompactError> {
    ask_agent_job(
        team,
        agent,
        OpenScope {
            label: label.into(),
        },
    )
    .await?
}

/// Close the innermost open scope of `agent` and compress it into one summary.
///
/// Returns the summary, or `None` if the scope was empty (skipped).
pub async fn close_scope(
    team: &Team,
    agent: &str,
    prompt: Option<String>,
    model: Option<Arc<dyn ChatModel>>,
) -> Result<Option<String>, CompactError> {
    ask_agent_job(team, agent, CloseScope { prompt, model }).await?
}

/// `/clear` on `agent` (see [`ClearConversation`]), between its requests.
///
/// # Errors
/// [`ClearError`]: the agent could not be reached, or its session log could not be written (the
/// conversation is then unchanged).
pub async fn clear_conversation(team: &Team, agent: &str) -> Result<(), ClearError> {
    team.directory()
        .ask_job(
            agent,
            ClearConversation,
            TraceContext::new_root(),
            COMPACTION_TIMEOUT,
        )
        .await?
        .map_err(ClearError::Session)
}

/// Why `/clear` did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClearError {
    /// The agent could not be reached.
    #[error(transparent)]
    Ask(#[from] troupe_runtime::AskError),
    /// Its session log could not be written; nothing was cleared.
    #[error("the session log could not record the clear: {0}")]
    Session(crate::session::SessionError),
}

/// Why `/resume` did not happen; the agent keeps its conversation and its log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SwitchError {
    /// The agent could not be reached.
    #[error(transparent)]
    Ask(#[from] troupe_runtime::AskError),
    /// The agent keeps no session log (its spec names none), so there is nothing to switch.
    #[error("agent `{0}` keeps no session log")]
    NoSession(String),
    /// The other log is in use, unreadable or invalid, or could not be written.
    #[error(transparent)]
    Session(#[from] crate::session::SessionError),
}

/// `/resume SESSION` on `agent`: see [`SwitchSession`]. Answers the number of messages restored.
pub async fn switch_session(
    team: &Team,
    agent: &str,
    path: impl Into<std::path::PathBuf>,
) -> Result<usize, SwitchError> {
    team.directory()
        .ask_job(
            agent,
            SwitchSession { path: path.into() },
            TraceContext::new_root(),
            COMPACTION_TIMEOUT,
        )
        .await?
}

/// `/context`: tokens, percent, per-kind breakdown and the last compaction of `agent`.
pub async fn context_stats(team: &Team, agent: &str) -> Result<ContextStats, CompactError> {
    ask_agent_job(team, agent, ContextQuery).await
}
