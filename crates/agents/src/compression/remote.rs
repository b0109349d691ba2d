//! A compression agent on another node: the compaction job's wire form, and what an agent does
//! when that node cannot be reached.
//!
//! A [`CompactionJob`] holds the asking agent's model and token cache, which cannot leave its
//! process; [`RemoteCompactionJob`] is the same request without them (the remote compression
//! agent summarizes with its own model, or mechanically). When the node holding the compression
//! agent is down or does not answer, the agent compacts on its own node with the same planner
//! the compression agent finishes every compaction with ([`compact_here`]): `compact`, the one
//! road with no model steering, and the mechanical summarizer.

use serde::{Deserialize, Serialize};
use troupe_compaction::{
    Archive, BudgetPolicy, CompactOptions, CompactTrigger, Compaction, CompactionError,
    CompactionReport, MechanicalSummarizer, TokenCounter, compact,
};
use troupe_runtime::{ChatMessage, Conversation, Job, StoredMessage, Team, WireJob};
use troupe_tools::FileLedger;

use crate::compression::CompactionJob;

/// A [`CompactionJob`] as it travels to a compression agent on another node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoteCompactionJob {
    /// Whose conversation it is.
    pub agent: String,
    /// The conversation as it stands.
    pub conversation: Conversation,
    /// The agent's file ledger.
    pub ledger: FileLedger,
    /// The agent's budget.
    pub policy: BudgetPolicy,
    /// What asked for it.
    pub trigger: CompactTrigger,
    /// Custom instructions / focus for summaries.
    pub instructions: Option<String>,
}

impl Job for RemoteCompactionJob {
    /// The validated compaction, or why it failed (as text: the error's types stay home).
    type Reply = Result<RemoteCompaction, String>;
}

/// A [`Compaction`] as it travels back: its messages in their stored form, so their ids and
/// kinds (summaries, stubs) arrive with them — a [`ChatMessage`]'s own serde form is the OpenAI
/// message alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteCompaction {
    /// The compacted conversation's messages, with ids and kinds.
    pub messages: Vec<StoredMessage>,
    /// Every original the compaction replaced or removed.
    pub archive: Archive,
    /// What the compaction did.
    pub report: CompactionReport,
}

impl From<Compaction> for RemoteCompaction {
    fn from(compaction: Compaction) -> Self {
        RemoteCompaction {
            messages: compaction
                .messages
                .iter()
                .map(StoredMessage::from)
                .collect(),
            archive: compaction.archive,
            report: compaction.report,
        }
    }
}

impl From<RemoteCompaction> for Compaction {
    fn from(remote: RemoteCompaction) -> Self {
        Compaction {
            messages: remote.messages.into_iter().map(ChatMessage::from).collect(),
            archive: remote.archive,
            report: remote.report,
        }
    }
}

impl WireJob for RemoteCompactionJob {
    const KIND: &'static str = "troupe.compaction/1";
}

impl From<&CompactionJob> for RemoteCompactionJob {
    fn from(job: &CompactionJob) -> Self {
        RemoteCompactionJob {
            agent: job.agent.clone(),
            conversation: job.conversation.clone(),
            ledger: job.ledger.clone(),
            policy: job.policy.clone(),
            trigger: job.trigger,
            instructions: job.instructions.clone(),
        }
    }
}

impl From<RemoteCompactionJob> for CompactionJob {
    fn from(job: RemoteCompactionJob) -> Self {
        CompactionJob {
            agent: job.agent,
            conversation: job.conversation,
            ledger: job.ledger,
            policy: job.policy,
            trigger: job.trigger,
            instructions: job.instructions,
            agent_model: None,
            token_cache: None,
        }
    }
}

/// Let agents on other nodes of a cluster send this team's compression agent their compactions
/// (called wherever a team gets its compression agent).
pub(crate) fn accept_remote_compactions(team: &Team) {
    team.directory().accept_wire_job::<RemoteCompactionJob>();
}

/// Compact `job` on this node with the planner and the mechanical summarizer, because the
/// compression agent could not be reached (`why`, recorded in the report's fallbacks).
pub(crate) async fn compact_here(
    job: &CompactionJob,
    counter: &dyn TokenCounter,
    why: &str,
) -> Result<Compaction, CompactionError> {
    let options = CompactOptions {
        instructions: job.instructions.clone(),
        trigger: job.trigger,
        token_cache: job.token_cache.clone(),
        ..CompactOptions::default()
    };
    let mechanical = MechanicalSummarizer::new();
    let mut compaction = compact(
        &job.conversation,
        &job.ledger,
        &job.policy,
        counter,
        Some(&mechanical),
        options,
    )
    .await?;
    compaction
        .report
        .fallbacks
        .push(format!("compacted by the agent's own node: {why}"));
    Ok(compaction)
}
