//! troupe: an actor-based multi-agent runtime with a dedicated context-compression agent.
//!
//! This facade re-exports the workspace crates:
//! - [`runtime`]: protocol types, the supervisor ([`Team`]), events and trace context;
//! - [`tools`]: the [`Tool`] trait, the [`ToolRegistry`], built-in file tools, the file ledger;
//! - [`compaction`]: token budgets, compaction tiers, summaries, invariants, the archive;
//! - [`agents`]: model providers, the LLM agent, the compression agent.
//!
//! ```no_run
//! use std::sync::Arc;
//! use troupe::{AgentSpec, Team, TeamConfig, spawn_agent};
//! use troupe::agents::model::{ScriptedModel, ScriptedReply};
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let team = Team::start(TeamConfig::default()).await?;
//! let model = Arc::new(ScriptedModel::new("demo", [ScriptedReply::text("Hello!")]));
//! spawn_agent(&team, AgentSpec::new("greeter", model)).await?;
//! println!("{}", team.ask("greeter", "Say hello").await?);
//! team.shutdown().await;
//! # Ok(()) }
//! ```

pub mod atomic_write;
pub mod config;
pub mod summary;
pub mod telemetry;
pub mod trace_tree;
pub mod transcript_file;
pub mod transcript_ops;

pub use troupe_agents as agents;
pub use troupe_compaction as compaction;
pub use troupe_runtime as runtime;
pub use troupe_tools as tools;

pub use troupe_agents::{AgentSpec, LlmAgent, spawn_agent};
pub use troupe_runtime::{
    AgentRequest, AskError, ChatMessage, ChatModel, Conversation, Event, EventRecord, Team,
    TeamConfig,
};
pub use troupe_tools::{Tool, ToolContext, ToolError, ToolRegistry};
