//! A team with its compression agent and its LLM agents in one expression:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use troupe_models::ScriptedModel;
//! use troupe_agents::{AgentSpec, TeamBuilderExt, shared_counter};
//! use troupe_agents::compression::CompressionConfig;
//! use troupe_runtime::Team;
//!
//! let model = Arc::new(ScriptedModel::new("m", []).with_fallback("hello"));
//! let team = Team::builder()
//!     .compression(CompressionConfig::new(shared_counter()))
//!     .agent(AgentSpec::new("coder", model))
//!     .start()
//!     .await?;
//! println!("{}", team.ask("coder", "hi").await?);
//! team.shutdown().await;
//! # Ok(()) }
//! ```

use troupe_models::{Cassettes, ReplayError};
use troupe_runtime::{SpawnError, Team, TeamConfig, TeamError};

use crate::compression::{COMPRESSION_AGENT, CompressionAgent, CompressionConfig, CompressorModel};
use crate::llm_agent::LlmAgent;
use crate::spec::AgentSpec;

/// What a team is started with: its config, its compression agent, its agents.
#[derive(Default)]
pub struct TeamBuilder {
    config: TeamConfig,
    compression: Option<CompressionConfig>,
    agents: Vec<AgentSpec>,
    cassettes: Option<Cassettes>,
}

/// Why [`TeamBuilder::start`] gave no team; a team that was started is shut down again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TeamBuildError {
    /// The supervisor could not start.
    #[error(transparent)]
    Team(#[from] TeamError),
    /// An agent could not be spawned (a duplicate name, a failing factory, a locked session).
    #[error("agent `{name}` could not be spawned: {cause}")]
    Agent {
        /// The agent's name.
        name: String,
        /// The supervisor's refusal (duplicate name, failing factory, locked session log).
        cause: SpawnError,
    },
    /// The run's cassettes could not be opened (recording: not created; replaying: missing,
    /// corrupt or of another format version, and left as they were). No agent was started.
    #[error(transparent)]
    Cassettes(#[from] ReplayError),
}

impl TeamBuilder {
    /// The team's supervisor settings (restart policy, shutdown grace, event capacity).
    pub fn config(mut self, config: TeamConfig) -> Self {
        self.config = config;
        self
    }

    /// Give the team its compression agent (named [`COMPRESSION_AGENT`]); without one, agents
    /// cannot compact and say so.
    pub fn compression(mut self, config: CompressionConfig) -> Self {
        self.compression = Some(config);
        self
    }

    /// Add an LLM agent.
    pub fn agent(mut self, spec: AgentSpec) -> Self {
        self.agents.push(spec);
        self
    }

    /// Record every model call of the run to `cassettes`, or serve them from it: one cassette
    /// per agent (see [`Cassettes`]). Without this, the builder follows
    /// [`TROUPE_CASSETTES`](troupe_models::CASSETTES_ENV) (`record:DIR` or `replay:DIR`), so
    /// any program built on it records and replays with no change to its code; keep a clone
    /// to [`Cassettes::verify`] the replay after the run.
    pub fn cassettes(mut self, cassettes: Cassettes) -> Self {
        self.cassettes = Some(cassettes);
        self
    }

    /// Start the supervisor and spawn the compression agent and every agent in one supervisor
    /// message.
    ///
    /// # Errors
    /// [`TeamBuildError`]: the cassettes could not be opened (nothing was started), or the
    /// first agent that could not be spawned (the team is shut down).
    pub async fn start(mut self) -> Result<Team, TeamBuildError> {
        let cassettes = match self.cassettes.take() {
            Some(cassettes) => Some(cassettes),
            None => Cassettes::from_env()?,
        };
        if let Some(cassettes) = &cassettes {
            self.put_on(cassettes)?;
        }
        let team = Team::start(self.config).await?;
        let mut names = Vec::new();
        let mut factories = Vec::new();
        if let Some(config) = self.compression {
            crate::compression::accept_remote_compactions(&team);
            names.push(COMPRESSION_AGENT.to_string());
            factories.push((
                COMPRESSION_AGENT.to_string(),
                CompressionAgent::factory(config),
            ));
        }
        let mut budgets = Vec::new();
        for spec in self.agents {
            names.push(spec.name.clone());
            budgets.push((spec.name.clone(), spec.budget.clone()));
            factories.push((spec.name.clone(), LlmAgent::factory(spec)));
        }
        let results = match team.spawn_many(factories).await {
            Ok(results) => results,
            Err(e) => {
                team.shutdown().await;
                return Err(e.into());
            }
        };
        if let Some((name, cause)) = names
            .into_iter()
            .zip(results)
            .find_map(|(name, r)| r.err().map(|cause| (name, cause)))
        {
            team.shutdown().await;
            return Err(TeamBuildError::Agent { name, cause });
        }
        let team_budgets = crate::spend::TeamBudgets::of(team.directory());
        for (name, budget) in &budgets {
            team_budgets.put(name, budget);
        }
        Ok(team)
    }
}

impl TeamBuilder {
    /// Give every agent's model its cassette, and the compression agent's own model (when it
    /// has one) the compressor's: all of them before anything starts, so a cassette that does
    /// not open starts nothing.
    fn put_on(&mut self, cassettes: &Cassettes) -> Result<(), ReplayError> {
        for spec in &mut self.agents {
            spec.model = cassettes.wrap(&spec.name, spec.model.clone())?;
        }
        if let Some(config) = &mut self.compression {
            config.model = match &config.model {
                CompressorModel::AgentsOwnOr(model) => {
                    CompressorModel::AgentsOwnOr(cassettes.wrap(COMPRESSION_AGENT, model.clone())?)
                }
                CompressorModel::Fixed(model) => {
                    CompressorModel::Fixed(cassettes.wrap(COMPRESSION_AGENT, model.clone())?)
                }
                // The agents' own models carry their cassettes already.
                other @ (CompressorModel::None | CompressorModel::AgentsOwn) => other.clone(),
            };
        }
        Ok(())
    }
}

/// `Team::builder()`: the [`TeamBuilder`] as an associated function of [`Team`] (bring this
/// trait into scope, e.g. with `use troupe::prelude::*`).
pub trait TeamBuilderExt {
    /// A builder for a team with a compression agent and LLM agents.
    fn builder() -> TeamBuilder;
}

impl TeamBuilderExt for Team {
    fn builder() -> TeamBuilder {
        TeamBuilder::default()
    }
}
