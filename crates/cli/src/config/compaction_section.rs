//! The `[compaction]` table: one agent's compaction settings and the compression agent's, as a
//! configuration file writes them.

use serde::{Deserialize, Serialize};
use troupe_agents::compression::DEFAULT_MAX_CONCURRENT;
use troupe_agents::{AtLimit, CompactionSettings, WorkAhead};
use troupe_compaction::ContextPolicy;
use troupe_compaction::economics::CostModel;

#[cfg(doc)]
use super::Config;

/// `[compaction]`: the file form of an agent's [`CompactionSettings`] (its [`ContextPolicy`]'s
/// thresholds, `auto`, the output reserve, work ahead, at the limit, the `recall` tool) and of
/// the compression agent's [`CompressionConfig`] (`model`, `max_concurrent`), in one table as
/// users write it. A view, not a third set of settings: its defaults are those types' defaults
/// ([`CompactionSection::default`]), and [`CompactionSection::settings`] and
/// [`Config::compression_config`] are the only roads from it to them.
///
/// [`CompressionConfig`]: troupe_agents::compression::CompressionConfig
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionSection {
    /// The model that summarizes (a key of `[models]`); default: the one with the lowest
    /// `cost_rank`, else each agent's own ([`Config::compaction_model`]).
    pub model: Option<String>,
    /// Compact automatically at the trigger ([`CompactionSettings::auto`]).
    pub auto: bool,
    /// Recent user/assistant messages never touched ([`ContextPolicy::protected_recent`]).
    pub protected_messages: usize,
    /// Warn at this fraction of the window ([`ContextPolicy::warning`]).
    pub warning: f64,
    /// Compact at this fraction ([`ContextPolicy::trigger`]).
    pub trigger: f64,
    /// Compact down to this fraction ([`ContextPolicy::target`]).
    pub target: f64,
    /// Automatic compactions compact down to the target the cost model chooses for the
    /// conversation (between 20 % and 60 % of the window, never below what the protected
    /// messages and a summary need) instead of `target`; `/compact` keeps `target`. On by
    /// default ([`ContextPolicy::cost_aware`]).
    pub cost_aware_target: bool,
    /// Tokens every model request keeps free for the answer: it is compacted before the call
    /// when its prompt plus this reaches the trigger. Default: the agent's `max_tokens`, else
    /// 4096; at most a quarter of the window whatever is set here
    /// ([`CompactionSettings::output_reserve`]).
    pub output_reserve: Option<usize>,
    /// When an agent has its conversation compacted ahead of the trigger, in the background,
    /// while it works on: `"at_warning"` (the default), `{ at = 0.6 }` (a fraction of the
    /// window) or `"off"` (only at the trigger, waiting for it).
    pub work_ahead: WorkAhead,
    /// What an agent that works ahead does when its next request would not fit the window
    /// before a background compaction landed: `"make_room"` (the default: compact at once on
    /// its own node, without a model, in milliseconds) or `"wait"` (for the job in flight, or
    /// for the compression agent).
    pub at_limit: AtLimit,
    /// Whether agents get the `recall` tool once compaction has archived something: it reads
    /// an archived original back by the id a stub or summary names, or searches the archive.
    pub recall_tool: bool,
    /// How many compactions of different agents the compression agent runs at once (one
    /// agent's never overlap): 1 by default, as a local model runs one call at a time; more
    /// for a remote model that serves calls in parallel. From 1 to 64 (the compression agent's
    /// `max_concurrent`).
    pub max_concurrent: usize,
    /// The prompt cache the agents' provider bills under: `"openai"` (automatic prefix
    /// caching) or `"anthropic"` (explicit breakpoints, 1.25× writes). Receipts are priced
    /// under it and the minimum-gain rule weighs it alone; unset, receipts use OpenAI's rates
    /// and the rule declines what loses under either ([`ContextPolicy::pricing`]).
    pub pricing: Option<String>,
    /// Rates for `pricing` other than its provider's defaults, in uncached-input-token units:
    /// e.g. `"input=1,cached=0.1,write=1.25"` (any of the three).
    pub rates: Option<String>,
}

impl CompactionSection {
    /// The cost model `pricing` and `rates` name (`None`: unset). Checked by
    /// the config's validation; an unreadable one here is `None`.
    pub fn pricing(&self) -> Option<CostModel> {
        let model: CostModel = self.pricing.as_deref()?.parse().ok()?;
        match &self.rates {
            Some(spec) => model
                .rates()
                .with_overrides(spec)
                .ok()
                .map(|rates| model.with_rates(rates)),
            None => Some(model),
        }
    }
}

/// The most compactions `[compaction] max_concurrent` may run at once: each holds a copy of
/// its conversation and a model call, and more than this is a typo, not a provider's limit.
pub(crate) const MAX_CONCURRENT_COMPACTIONS: usize = 64;

impl Default for CompactionSection {
    /// The file form of the defaults: [`CompactionSettings::default`] with the default
    /// [`ContextPolicy`], and the compression agent's default concurrency. The table keeps no
    /// default of its own.
    fn default() -> Self {
        let settings = CompactionSettings::default();
        let policy = ContextPolicy::default();
        CompactionSection {
            model: None,
            auto: settings.auto,
            protected_messages: policy.protected_recent,
            warning: policy.warning,
            trigger: policy.trigger,
            target: policy.target,
            cost_aware_target: policy.cost_aware,
            output_reserve: settings.output_reserve,
            work_ahead: settings.work_ahead,
            at_limit: settings.at_limit,
            recall_tool: settings.recall_tool,
            // `CompressionConfig::default()` would build the shared BPE counter for one number.
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            // The file names a cost model by its provider; the policy's default prices none.
            pricing: None,
            rates: None,
        }
    }
}

impl CompactionSection {
    /// The context policy for a model with `context_window` tokens: the window's defaults
    /// ([`ContextPolicy::for_window`]) with this table's thresholds, protection and pricing.
    pub fn policy(&self, context_window: usize) -> ContextPolicy {
        ContextPolicy {
            context_window,
            warning: self.warning,
            trigger: self.trigger,
            target: self.target,
            cost_aware: self.cost_aware_target,
            pricing: self.pricing(),
            protected_recent: self.protected_messages,
            // The window's own defaults: a fixed `min_freeable_tokens` of 10,000 would have the
            // anti-thrash guard skip every automatic compaction of a window under ~12k tokens.
            ..ContextPolicy::for_window(context_window)
        }
    }

    /// An agent's compaction settings for a model with `context_window` tokens: this table's
    /// policy ([`CompactionSection::policy`]) and switches on the defaults of what a file does
    /// not set (the counter, the `compact` tool, hooks) — what `troupe chat` and `troupe node`
    /// give their agents.
    pub fn settings(&self, context_window: usize) -> CompactionSettings {
        CompactionSettings {
            policy: Some(self.policy(context_window)),
            auto: self.auto,
            output_reserve: self.output_reserve,
            work_ahead: self.work_ahead,
            at_limit: self.at_limit,
            recall_tool: self.recall_tool,
            ..CompactionSettings::default()
        }
    }
}
