//! The one road every compaction takes: [`compact_with`] opens a [`CompactionSession`], applies
//! the anti-thrash guard to automatic triggers, lets a [`Steering`] (the compression agent's model
//! loop over the four tools) work, and has the deterministic planner finish whatever is left.
//! [`compact`] is the same road with no steering.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, Conversation};

use crate::archive::Archive;
use crate::economics::CostModel;
use crate::economics::Lead;
use crate::economics::min_gain::PlannedGain;
use crate::economics::target::cost_aware_policy;
use crate::error::CompactionError;
use crate::guard::ThrashGuard;
use crate::policy::ContextPolicy;
use crate::session::CompactionSession;
use crate::summary::Summarizer;
use troupe_protocol::CompactionReport;
use troupe_tokens::TokenCounter;
use troupe_tokens::{CachedCounter, TokenCache};

// Defined in the runtime, beside the report, so `Event::CompactionStarted` carries it typed.
use troupe_protocol::CompactTrigger;

/// How one compaction runs, besides the conversation, its ledger and the [`ContextPolicy`] it
/// works to: its focus, trigger, lead, the anti-thrash memory and the warm token cache. Per
/// compaction, not configuration (an agent's configuration is its `CompactionSettings`), and not
/// the request: the compression agent derives these options from each `CompactionRequest` it is
/// sent (`troupe_agents::compression`), which also carries the conversation.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// What the summaries should keep in view (`/compact the parser bug`): a line added to each
    /// summary prompt. Not the agent's instructions (its system prompt), which are a message.
    pub focus: Option<String>,
    /// Shorten old user/assistant messages one by one (user ≤ 50, assistant ≤ 200 tokens)
    /// before summarizing segments.
    pub per_message: bool,
    /// Treat a `<summary>` message inside a summarized segment as the previous summary and merge
    /// it (the update prompt; file lists are united). On by default.
    pub detect_previous_summary: bool,
    /// A warm per-message count cache shared with the agent (counts only new messages).
    pub token_cache: Option<TokenCache>,
    /// What asked for this compaction.
    pub trigger: CompactTrigger,
    /// The anti-thrash memory for automatic triggers (`None`: only the minimum applies).
    pub guard: Option<ThrashGuard>,
    /// When the answer is applied: the minimum-gain rule asks whether the window needs it
    /// then (a compaction worked ahead lands turns later).
    pub lead: Lead,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            focus: None,
            per_message: false,
            detect_previous_summary: true,
            token_cache: None,
            trigger: CompactTrigger::Manual,
            guard: None,
            lead: Lead::NextTurn,
        }
    }
}

/// A validated compaction: the new messages, the archive of what they replaced, the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compaction {
    /// The compacted conversation (ids preserved; stubs and summaries have fresh ids).
    pub messages: Vec<ChatMessage>,
    /// Every original this compaction replaced or removed.
    pub archive: Archive,
    /// Tokens, tiers, summarizer use and fallbacks: what this compaction did and why it ended so.
    pub report: CompactionReport,
}

impl Compaction {
    /// Whether anything changed.
    pub fn changed(&self) -> bool {
        !self.archive.is_empty()
    }

    /// Put the compacted messages into `conversation` (its id counter moves past the new ids).
    pub fn apply_to(&self, conversation: &mut Conversation) {
        conversation.replace_messages(self.messages.clone());
    }
}

/// Compact `conversation` to `policy`'s target, cheapest tier first.
///
/// Without a summarizer only tiers 1–2 run. The result is validated before it is returned; an
/// unreachable target is not an error but a report with `reached: false` and the reason.
///
/// ```no_run
/// # async fn demo() -> Result<(), troupe_compaction::CompactionError> {
/// use troupe_compaction::{ContextPolicy, CompactOptions, compact};
/// use troupe_compaction::summary::MechanicalSummarizer;
/// use troupe_tokens::TiktokenCounter;
/// use troupe_protocol::Conversation;
/// use troupe_protocol::FileLedger;
/// let conversation = Conversation::new();
/// let counter = TiktokenCounter::default();
/// let result = compact(
///     &conversation,
///     &FileLedger::new(),
///     &ContextPolicy::for_window(32_000),
///     &counter,
///     Some(&MechanicalSummarizer::new()),
///     CompactOptions::default(),
/// )
/// .await?;
/// println!("{} → {} tokens: {}", result.report.tokens_before, result.report.tokens_after, result.report.reason);
/// # Ok(()) }
/// ```
pub async fn compact(
    conversation: &Conversation,
    ledger: &FileLedger,
    policy: &ContextPolicy,
    counter: &dyn TokenCounter,
    summarizer: Option<&dyn Summarizer>,
    request: CompactOptions,
) -> Result<Compaction, CompactionError> {
    compact_with(
        conversation,
        ledger,
        policy,
        counter,
        summarizer,
        request,
        &NoSteering,
    )
    .await
}

/// Whoever works a [`CompactionSession`] with the four tools before the planner finishes: the
/// compression agent's model loop. It is called only when a compaction goes ahead (over target,
/// and for automatic triggers allowed by the guard).
#[async_trait]
pub trait Steering: Send + Sync {
    /// Work `session` towards its target; whatever is left, the planner finishes.
    async fn steer(&self, session: &mut CompactionSession<'_>, summarizer: Option<&dyn Summarizer>);
}

/// No steering: the planner does everything.
struct NoSteering;

#[async_trait]
impl Steering for NoSteering {
    async fn steer(&self, _: &mut CompactionSession<'_>, _: Option<&dyn Summarizer>) {}
}

/// [`compact`] with `steering` working the session before the planner: what the compression
/// agent runs for every compaction, whatever asked for it.
///
/// An automatic or agent-tool trigger is skipped (the report says why, nothing changes) unless
/// `request.guard` allows it: after an attempt, the next one waits until
/// [`ContextPolicy::min_freeable_tokens`] more tokens are freeable. It is also declined when its
/// planned receipt nets a loss under OpenAI's default rates (it would re-bill more than it saves
/// over the turns until the next one), unless the window needs it: see
/// [`economics`](crate::economics).
///
/// # Errors
/// [`CompactionError`] for an invalid policy or input, or a result that broke an invariant.
pub async fn compact_with(
    conversation: &Conversation,
    ledger: &FileLedger,
    policy: &ContextPolicy,
    counter: &dyn TokenCounter,
    summarizer: Option<&dyn Summarizer>,
    request: CompactOptions,
    steering: &dyn Steering,
) -> Result<Compaction, CompactionError> {
    let trigger = request.trigger;
    let guard = request.guard;
    let lead = request.lead;
    // The cost model's measures count whole conversations: from the warm cache when there is
    // one (a conversation of 100k tokens takes BPE tens of milliseconds).
    let cache = request.token_cache.clone();
    let measuring = CachedCounter::new(counter, cache.as_ref());
    // Automatic compactions shrink to the cost-aware target when the policy asks for it;
    // a person's `/compact` and an emergency keep the configured one.
    let chosen = trigger
        .is_rate_limited()
        .then(|| {
            cost_aware_policy(
                policy,
                conversation.messages(),
                &measuring,
                summarizer,
                trigger,
            )
        })
        .flatten();
    let policy = chosen.as_ref().unwrap_or(policy);
    let mut session = CompactionSession::new(conversation, ledger, policy, counter, request)?;
    if session.verify_target().reached {
        return session.finish();
    }
    if trigger.is_rate_limited() {
        let freeable = session.freeable_tokens();
        if let Err(why) = guard.unwrap_or_default().allows(freeable, policy) {
            return session.finish_skipped(why);
        }
        // The minimum-gain rule: not when it re-bills more than it saves, unless the window
        // needs it (economics/min_gain.rs).
        let plan = PlannedGain::of(&session, &measuring, summarizer.is_some(), lead);
        // Priced under the agent's provider's caching when the policy names it; otherwise
        // under both, and a compaction that loses under either is declined (Anthropic's 1.25×
        // cache write makes a rewrite dearer than OpenAI's).
        let declined = match &policy.pricing {
            Some(pricing) => plan.declines(pricing),
            None => plan
                .declines(&CostModel::openai())
                .or_else(|| plan.declines(&CostModel::anthropic())),
        };
        if let Some(why) = declined {
            return session.finish_skipped(why);
        }
    }
    steering.steer(&mut session, summarizer).await;
    if !session.verify_target().reached {
        // Whatever the steering did, the planner finishes: the target is met when reachable.
        session.finish_deterministically(summarizer).await;
    }
    session.finish()
}
