//! What the compression agent is asked: its jobs are one enum, [`CompressorJob`], whose
//! variants carry their answer port. A compaction is one [`CompactionRequest`] on every road —
//! an agent of this team, an agent on another node (the request's serde form), the CLI's
//! `compact` and `replay`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use troupe_compaction::economics::Lead;
use troupe_compaction::{CompactOptions, Compaction, CompactionError, ContextPolicy};
use troupe_protocol::CompactTrigger;
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, ChatModel, Conversation, ToolDefinition};
use troupe_runtime::Reply;
use troupe_tokens::TokenCache;

use super::hooks::CompactionHooks;
use crate::spend::SpendMeter;

/// The compression agent's jobs.
#[derive(Debug)]
#[non_exhaustive]
pub enum CompressorJob {
    /// Compact one agent's conversation: the validated compaction (possibly "no compaction
    /// needed", or an automatic trigger the anti-thrash guard skipped; the report says which).
    Compact(
        Box<CompactionRequest>,
        Reply<Result<Compaction, CompactionError>>,
    ),
    /// Write the summary of a closed scope: the summary text, trimmed and never empty.
    SummarizeScope(
        Box<ScopeSummaryRequest>,
        Reply<Result<String, ScopeSummaryError>>,
    ),
    /// The agent now waits for its compaction that is still queued (it reached the trigger
    /// while working ahead): rank that job by the room the agent has left now, not by the room
    /// it had when the job was sent. `true` when a queued compaction was re-ranked; `false`
    /// when the agent's compaction is already running, or none is queued.
    Hurry(Hurry, Reply<bool>),
}

/// Which agent waits for its queued compaction, and with how much room. Its serde form is
/// what travels to a compression agent on another node (`remote.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hurry {
    /// Whose compaction it is.
    pub agent: String,
    /// Tokens left before the agent's hard limit now (its context window less its
    /// conversation's tokens; negative when over it).
    pub room: i64,
}

/// A request to compact one agent's conversation. Its serde form is what travels to a
/// compression agent on another node; what cannot leave the process ([`InProcess`]) is left
/// out of it.
#[derive(Clone, Serialize, Deserialize)]
pub struct CompactionRequest {
    /// Whose conversation it is (compactions of one agent never overlap, and the anti-thrash
    /// guard keeps its memory per name).
    pub agent: String,
    /// The conversation as it stands; it is copied, never changed in place.
    pub conversation: Conversation,
    /// The agent's file ledger (stubs and summary file lists come from it).
    pub ledger: FileLedger,
    /// The window, thresholds and target the compaction works to.
    pub policy: ContextPolicy,
    /// What asked for it (automatic triggers are held back by the anti-thrash guard).
    pub trigger: CompactTrigger,
    /// What the summaries should keep in view (`/compact the parser bug`); not the agent's
    /// instructions (its system prompt).
    pub focus: Option<String>,
    /// When the answer is applied (a compaction worked ahead lands turns later): the
    /// minimum-gain rule weighs it there. Absent from an older peer's request: the next turn.
    #[serde(default)]
    pub lead: Lead,
    /// The conversation's tokens as the asker counted them (for `CompactionStarted`): the
    /// compression agent ranks the job by them instead of counting again. `None` — a request
    /// from an older peer, or one nobody counted — has the compression agent count.
    #[serde(default)]
    pub tokens: Option<usize>,
    /// What only an asker in this process can give.
    #[serde(skip)]
    pub in_process: InProcess,
}

impl CompactionRequest {
    /// A request with nothing from the asker's process.
    pub fn new(
        agent: impl Into<String>,
        conversation: Conversation,
        ledger: FileLedger,
        policy: ContextPolicy,
        trigger: CompactTrigger,
    ) -> Self {
        CompactionRequest {
            agent: agent.into(),
            conversation,
            ledger,
            policy,
            trigger,
            focus: None,
            lead: Lead::NextTurn,
            tokens: None,
            in_process: InProcess::default(),
        }
    }
}

impl CompactionRequest {
    /// What this request asks of the compaction crate — its focus, trigger, the asker's token
    /// cache and lead — on every road; the compression agent adds its anti-thrash memory.
    pub(crate) fn compact_options(&self) -> CompactOptions {
        CompactOptions {
            focus: self.focus.clone(),
            trigger: self.trigger,
            token_cache: self.in_process.token_cache.clone(),
            lead: self.lead,
            ..CompactOptions::default()
        }
    }
}

impl std::fmt::Debug for CompactionRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionRequest")
            .field("agent", &self.agent)
            .field("messages", &self.conversation.len())
            .field("trigger", &self.trigger)
            .finish()
    }
}

/// The part of a [`CompactionRequest`] that cannot leave the asker's process; a request from
/// another node arrives with none of it (the compression agent there summarizes with its own
/// model, or mechanically, and counts afresh).
#[derive(Clone, Default)]
pub struct InProcess {
    /// The requesting agent's own model: used for summaries when no compaction model is set.
    pub agent_model: Option<Arc<dyn ChatModel>>,
    /// The requesting agent's warm per-message token counts (shared, so only messages new
    /// since its last count are counted, and the stubs and summaries made here warm it back).
    pub token_cache: Option<TokenCache>,
    /// The tool definitions the agent sends with every model call. A summary written by the
    /// agent's own model continues the agent's conversation and sends them too: they come
    /// ahead of the messages in the prompt a provider caches.
    pub agent_tools: Vec<ToolDefinition>,
    /// The agent's compaction hooks: run on this side of the road, whoever compresses.
    pub hooks: CompactionHooks,
    /// The asking agent's spend meter: the summarizer calls count against its budgets.
    pub spend: Option<SpendMeter>,
    /// Make room on the asker's own node, without a model: the planner and the mechanical
    /// summarizer, in milliseconds (an agent that works ahead at its limit,
    /// [`AtLimit::MakeRoom`](crate::AtLimit::MakeRoom)). The compression agent is not asked.
    pub make_room: bool,
}

/// A request to write the summary of a closed scope (seed 000's scoped compression): the
/// messages of one finished part of an agent's work become one short summary.
#[derive(Clone)]
pub struct ScopeSummaryRequest {
    /// Whose scope it is.
    pub agent: String,
    /// The scope's label.
    pub label: String,
    /// The scope's messages, oldest first.
    pub messages: Vec<ChatMessage>,
    /// What the summary should keep (default: what was done and found).
    pub prompt: Option<String>,
    /// The model that writes the summary.
    pub model: Arc<dyn ChatModel>,
    /// The asking agent's spend meter: the summary call counts against its budgets, as a
    /// compaction's calls do.
    pub spend: Option<SpendMeter>,
}

impl std::fmt::Debug for ScopeSummaryRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeSummaryRequest")
            .field("agent", &self.agent)
            .field("label", &self.label)
            .field("messages", &self.messages.len())
            .finish()
    }
}

/// Why a scope could not be summarized; the scope's messages stay as they are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeSummaryError {
    /// The model call failed.
    #[error("the model failed: {0}")]
    Model(String),
    /// The model answered with nothing.
    #[error("the model returned an empty scope summary")]
    Empty,
}
