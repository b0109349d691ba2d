//! `/context`: where an agent's context stands.

use serde::{Deserialize, Serialize};
use troupe_protocol::CompactionReport;

use super::Context;
use crate::spend::SpendReport;

/// Where an agent's context stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextStats {
    /// Tokens a model request takes now: the conversation's and the tool definitions'.
    pub tokens: usize,
    /// Of those, the tool definitions' (names, descriptions, schemas).
    #[serde(default)]
    pub tool_tokens: usize,
    /// The context window.
    pub window: usize,
    /// Of the window, what every request keeps free for the model's answer.
    #[serde(default)]
    pub output_reserve: usize,
    /// Percent used of the usable window (the window less the output reserve): the base of
    /// the warning, the trigger and the target, as `[ctx: N%]` shows.
    pub percent: usize,
    /// The policy's warning mark, a fraction of the usable window (a live view draws it on the
    /// context meter; reading it here spares the view from guessing the agent's policy).
    #[serde(default = "default_warning")]
    pub warning: f64,
    /// The policy's automatic compaction trigger, a fraction of the usable window.
    #[serde(default = "default_trigger")]
    pub trigger: f64,
    /// The policy's compaction target, a fraction of the usable window.
    #[serde(default = "default_target")]
    pub target: f64,
    /// Messages and tokens by kind (`normal`, `summary`, `compressed_stub`, `display_only`).
    pub by_kind: Vec<ContextShare>,
    /// Messages and tokens by role (`system`, `user`, `assistant`, `tool`).
    pub by_role: Vec<ContextShare>,
    /// The last compaction's report, if any.
    pub last_compaction: Option<CompactionReport>,
    /// The compaction running ahead of the trigger while the agent works on, if one is.
    #[serde(default)]
    pub in_flight: Option<InFlightCompaction>,
    /// What the agent spent: the current (or last) request, the agent, its team.
    #[serde(default)]
    pub spend: SpendReport,
}

// Stats written before the marks were: the defaults, which is what such an agent ran under
// unless told otherwise.
fn default_warning() -> f64 {
    troupe_compaction::ContextPolicy::default().warning
}

fn default_trigger() -> f64 {
    troupe_compaction::ContextPolicy::default().trigger
}

fn default_target() -> f64 {
    troupe_compaction::ContextPolicy::default().target
}

/// A compaction running in the background: a snapshot of the conversation that the compression
/// agent compacts while the agent goes on; it is spliced in at a later turn boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightCompaction {
    /// Messages in the snapshot.
    pub messages: usize,
    /// The snapshot's tokens.
    pub tokens: usize,
    /// Milliseconds since it started.
    pub age_ms: u64,
}

/// One slice of a conversation: how many messages of a kind (or role) and their tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextShare {
    /// The kind or role.
    pub name: String,
    /// Messages of it.
    pub messages: usize,
    /// Their tokens (message tokens only; the request's reply priming is not attributed).
    pub tokens: usize,
}

impl Context {
    /// Where the context stands, with the tool definitions' `tool_tokens`, the job worked ahead
    /// `in_flight` and what the agent spent.
    pub(in crate::llm_agent) fn stats(
        &self,
        tool_tokens: usize,
        in_flight: Option<InFlightCompaction>,
        spend: SpendReport,
    ) -> ContextStats {
        let counts = self
            .token_cache
            .count_shared(self.counter.as_ref(), self.conversation.messages());
        let name_of = |v: serde_json::Result<serde_json::Value>| {
            v.ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        };
        let mut by_kind = std::collections::BTreeMap::<String, (usize, usize)>::new();
        let mut by_role = std::collections::BTreeMap::<String, (usize, usize)>::new();
        for (m, tokens) in self.conversation.messages().iter().zip(&counts.per_message) {
            for (map, name) in [
                (&mut by_kind, name_of(serde_json::to_value(m.kind))),
                (&mut by_role, name_of(serde_json::to_value(m.role))),
            ] {
                let share = map.entry(name).or_default();
                share.0 += 1;
                share.1 += tokens;
            }
        }
        let shares = |map: std::collections::BTreeMap<String, (usize, usize)>| {
            map.into_iter()
                .map(|(name, (messages, tokens))| ContextShare {
                    name,
                    messages,
                    tokens,
                })
                .collect()
        };
        let tokens = counts.total + tool_tokens;
        ContextStats {
            tokens,
            tool_tokens,
            window: self.policy.context_window,
            output_reserve: self.policy.output_reserve,
            percent: self.policy.percent(tokens),
            warning: self.policy.warning,
            trigger: self.policy.trigger,
            target: self.policy.target,
            by_kind: shares(by_kind),
            by_role: shares(by_role),
            last_compaction: self.last_compaction.clone(),
            in_flight,
            spend,
        }
    }
}
