//! troupe-agents: the LLM agent and the compression agent (the model providers are
//! `troupe_models`, the session log `troupe_session`).
//!
//! - [`LlmAgent`]: the turn loop (model → tools → model …) as an
//!   [`troupe_runtime::AgentBehavior`] the supervisor runs.
//! - [`AgentSpec`] and [`spawn_agent`]: describe an agent and put it in a [`troupe_runtime::Team`].

// Every `pub` item is reachable from the crate root: a public item with no public path is a
// mistake (it should be `pub(crate)`), and one path per item keeps the surface readable.
#![deny(unreachable_pub)]

mod compaction_settings;
pub mod compression;
mod llm_agent;
mod spec;
pub mod spend;
mod team_builder;
mod team_tools;
mod traced;

pub use compaction_settings::{AtLimit, CompactionSettings, WorkAhead, shared_counter};
pub use compression::client::{AppliedCompaction, COMPACTION_TIMEOUT, CompactionAskError};
pub use llm_agent::{
    COMPACT_TOOL, ClearError, CloseScope, ContextShare, ContextStats, ConversationCopy,
    InFlightCompaction, LlmAgent, LlmAgentHandle, LlmAgentJob, LlmAgentState, PinError,
    RECALL_TOOL, ScopeError, SwitchError,
};
pub use spec::{AgentSpec, DEFAULT_MAX_TURNS};
pub use team_builder::{TeamBuildError, TeamBuilder, TeamBuilderExt};
pub use team_tools::{ASK_AGENT_TIMEOUT, AskAgentArgs};
pub use traced::{TracedModel, tool_span, traced_chat, traced_chat_stream};

use troupe_runtime::{Team, TeamError, TeamSpawner};

use compression::{COMPRESSION_AGENT, CompressionAgent, CompressionConfig};

/// Spawn the team's compression agent (named [`COMPRESSION_AGENT`]).
pub async fn spawn_compression_agent(
    team: &Team,
    config: CompressionConfig,
) -> Result<(), TeamError> {
    team.spawn(COMPRESSION_AGENT, CompressionAgent::factory(config))
        .await?;
    compression::accept_remote_compactions(team);
    Ok(())
}

/// Spawn an LLM agent described by `spec` into `team` under the team's supervisor, its budget
/// registered with the team's.
pub async fn spawn_agent(team: &Team, spec: AgentSpec) -> Result<(), TeamError> {
    spawn_agent_with(&team.spawner(), spec).await
}

/// [`spawn_agent`] through the team's [`TeamSpawner`], for a task that holds no `Team` (a
/// standby node's takeover): the same road, the budget registered too.
pub async fn spawn_agent_with(spawner: &TeamSpawner, spec: AgentSpec) -> Result<(), TeamError> {
    let (name, budget) = (spec.name.clone(), spec.budget.clone());
    spawner.spawn(name.clone(), LlmAgent::factory(spec)).await?;
    spend::TeamBudgets::of(spawner.directory()).put(&name, &budget);
    Ok(())
}
