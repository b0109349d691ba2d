//! An agent's compaction settings — the one type that configures how an agent compacts; a
//! config file's `[compaction]` table is its file form (`troupe_cli`'s `CompactionSection`) —
//! and the shared token counter they default to.

use std::sync::{Arc, OnceLock};

use troupe_compaction::ContextPolicy;
use troupe_compaction::context_check::ContextCheck;
use troupe_tokens::{TiktokenCounter, TokenCounter};

use crate::compression::hooks::CompactionHooks;

/// An agent's compaction settings: the one type that configures how an agent compacts. What
/// one compaction is asked is a request ([`CompactionRequest`]); the compression agent's own
/// setup is [`CompressionConfig`]. A config file's `[compaction]` table is its file form, whose
/// defaults are these.
///
/// [`CompactionRequest`]: crate::compression::CompactionRequest
/// [`CompressionConfig`]: crate::compression::CompressionConfig
#[derive(Clone)]
pub struct CompactionSettings {
    /// The context policy; `None` derives it from the model's context window with default
    /// thresholds.
    pub policy: Option<ContextPolicy>,
    /// Whether the trigger threshold compacts automatically.
    pub auto: bool,
    /// The token counter; `None` uses the shared o200k BPE counter.
    pub counter: Option<Arc<dyn TokenCounter>>,
    /// Whether the agent gets the `compact` tool.
    pub agent_tool: bool,
    /// Whether the agent gets the `recall` tool (read back what compaction archived, by the id
    /// a stub or summary names, or search it) once something is archived. On by default: it
    /// is what makes a low compaction target lose nothing for good, and a fresh agent's tool
    /// list is unchanged until its first compaction.
    pub recall_tool: bool,
    /// Tokens kept free in the window for the model's answer: the warning, trigger and target
    /// are fractions of the window less this reserve (the usable window), and a request whose
    /// prompt plus this reserve cannot fit the window is refused. `None`: the agent's `max_tokens` when set, else
    /// [`troupe_tokens::DEFAULT_OUTPUT_RESERVE`]. Whatever is asked, at most a quarter of
    /// the window (see [`CompactionSettings::output_reserve_for`]).
    pub output_reserve: Option<usize>,
    /// When the agent asks for a compaction ahead of the trigger and goes on working while it
    /// runs (see [`WorkAhead`]).
    pub work_ahead: WorkAhead,
    /// What an agent that works ahead does at the limit, when its next request would not fit
    /// the window (see [`AtLimit`]).
    pub at_limit: AtLimit,
    /// Closures that see every compaction before and after it runs (see
    /// [`CompactionHooks`]); none by default.
    pub hooks: CompactionHooks,
}

/// When an agent starts a background compaction: a snapshot of its conversation, taken at a
/// turn boundary, is compacted while the agent goes on, and the answer is spliced in at a later
/// turn boundary. Past the trigger a job is started if none runs, and the agent still goes on;
/// at the limit, when its next request would not fit the window, it does what [`AtLimit`]
/// says. In a configuration file: `"off"`, `"at_warning"` or `{ at = 0.6 }`.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkAhead {
    /// Never: the agent compacts at the trigger and waits for it (the blocking road).
    Off,
    /// At the policy's warning threshold (70 % of the window by default).
    #[default]
    AtWarning,
    /// At this fraction of the context window (the trigger at the latest).
    At(f64),
}

/// What an agent that works ahead does at the limit — its next request would not fit the
/// window — when no background answer has landed: one step grew the conversation past the
/// limit faster than a job could run (a large file read at a small window), or it crossed the
/// warning and the limit at once. In a configuration file: `"make_room"` or `"wait"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AtLimit {
    /// Make room at once, without a model call: the planner compacts on the agent's own node,
    /// masking and truncating old tool results into the archive (`recall` and `expand` read
    /// every original back) — a millisecond or two; only when that leaves the conversation
    /// past the trigger are old turns summarized too, mechanically (tens of milliseconds). A
    /// job in flight is dropped as stale; the model summarizes in the background when the
    /// agent goes on past the work-ahead threshold. No agent waits on a model.
    #[default]
    MakeRoom,
    /// Wait: join the job in flight (never start a second), or compact through the compression
    /// agent as the blocking road does when none runs.
    Wait,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            policy: None,
            auto: true,
            counter: None,
            agent_tool: false,
            recall_tool: true,
            output_reserve: None,
            work_ahead: WorkAhead::default(),
            at_limit: AtLimit::default(),
            hooks: CompactionHooks::default(),
        }
    }
}

impl CompactionSettings {
    /// The tokens a request to a model with `context_window` tokens keeps free for the answer:
    /// [`CompactionSettings::output_reserve`], else `max_tokens` (the agent's cap on an answer),
    /// else [`troupe_tokens::DEFAULT_OUTPUT_RESERVE`] — capped at a quarter of the window,
    /// so that with the default trigger (80 %) and target (40 %) a compaction still leaves room
    /// for work before the next one (a small model's window is not given up to its answer).
    pub fn output_reserve_for(&self, max_tokens: Option<u32>, context_window: usize) -> usize {
        let wanted = self
            .output_reserve
            .or(max_tokens.map(|n| n as usize))
            .unwrap_or(troupe_tokens::DEFAULT_OUTPUT_RESERVE);
        wanted.min(context_window / 4)
    }

    /// The context check of an agent under `policy` (its [`CompactionSettings::policy_for`]):
    /// its thresholds, whether it compacts automatically, where it works ahead ([`WorkAhead`],
    /// the trigger at the latest) and what it does at the limit ([`AtLimit`]).
    pub(crate) fn context_check(&self, policy: &ContextPolicy) -> ContextCheck {
        let check = ContextCheck::new(policy, self.auto);
        let from = match self.work_ahead {
            WorkAhead::Off => return check,
            WorkAhead::AtWarning => policy.warning_tokens(),
            WorkAhead::At(fraction) => {
                (fraction.clamp(0.0, 1.0) * policy.usable_tokens() as f64) as usize
            }
        };
        check.working_ahead(from, self.at_limit == AtLimit::MakeRoom)
    }

    /// The policy for a model with this context window whose answers are capped at
    /// `max_tokens`: the configured policy (else the window's default) with the output reserve
    /// ([`CompactionSettings::output_reserve_for`]) taken out of the base its thresholds are
    /// fractions of.
    pub fn policy_for(&self, context_window: usize, max_tokens: Option<u32>) -> ContextPolicy {
        let policy = self
            .policy
            .clone()
            .unwrap_or_else(|| ContextPolicy::for_window(context_window));
        ContextPolicy {
            output_reserve: self.output_reserve_for(max_tokens, policy.context_window),
            ..policy
        }
    }

    /// The counter to use.
    pub fn counter(&self) -> Arc<dyn TokenCounter> {
        self.counter.clone().unwrap_or_else(shared_counter)
    }
}

/// The process-wide exact BPE counter (free to take: its vocabulary is built on its first count).
pub fn shared_counter() -> Arc<dyn TokenCounter> {
    static COUNTER: OnceLock<Arc<dyn TokenCounter>> = OnceLock::new();
    COUNTER
        .get_or_init(|| Arc::new(TiktokenCounter::default()))
        .clone()
}
