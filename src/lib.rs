//! troupe: an actor-based multi-agent runtime with a dedicated context-compression agent.
//!
//! This facade is the library a program imports (the `troupe` command line lives in the
//! binary). It re-exports the workspace crates:
//! - [`protocol`]: the types every crate speaks: messages, conversations, the [`ChatModel`]
//!   trait, events, compaction reports, trace ids;
//! - [`host`]: credentials held out of the environment, the one TLS crypto provider;
//! - [`runtime`]: the supervisor ([`Team`]), the event bus, the approval and spend desks;
//! - [`tools`]: the [`Tool`] trait, the [`ToolRegistry`], built-in file tools, the file ledger;
//! - [`tokens`]: token counting (exact BPE, the per-message cache), prompt-cache blocks;
//! - [`compaction`]: context policies, compaction tiers, summaries, invariants, the archive;
//! - [`models`]: the model providers (OpenAI-compatible, Anthropic, embedded llama.cpp, replay);
//! - [`session`]: the session log an agent commits its conversation and durable steps to;
//! - [`agents`]: the LLM agent, the compression agent;
//! - [`cluster`]: a team across processes and machines (ractor_cluster nodes);
//! - `mcp` (feature `mcp`): any MCP server's tools as a tool source, a registry served over MCP;
//! - `ui` (feature `ui`): the team's live view in the browser;
//! - `a2a` (feature `a2a`): A2A 1.0 both ways — remote agents as teammates, agents served.
//!
//! The three features are on by default (the `troupe` binary, feature `cli`, needs them).
//!
//! and adds [`telemetry`] (console logs, the JSONL trace file, OTLP export with the `otlp`
//! feature) and [`summary`] (a per-agent summary of a run from its events).
//!
//! A team with its compression agent and an agent, in one expression:
//!
//! ```no_run
//! use std::sync::Arc;
//! use troupe::prelude::*;
//! use troupe::agents::compression::CompressionConfig;
//! use troupe::models::{ScriptedModel, ScriptedReply};
//! use troupe::{AgentSpec, Team};
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let model = Arc::new(ScriptedModel::new("demo", [ScriptedReply::text("Hello!")]));
//! let team = Team::builder()
//!     .compression(CompressionConfig::default())
//!     .agent(AgentSpec::new("greeter", model))
//!     .start()
//!     .await?;
//! println!("{}", team.ask("greeter", "Say hello").await?);
//! team.shutdown().await;
//! # Ok(()) }
//! ```

// Every `pub` item is reachable from the crate root: a public item with no public path is a
// mistake (it should be `pub(crate)`), and one path per item keeps the surface readable.
#![deny(unreachable_pub)]

pub mod summary;
pub mod telemetry;

#[cfg(feature = "a2a")]
pub use troupe_a2a as a2a;
pub use troupe_agents as agents;
pub use troupe_cluster as cluster;
pub use troupe_compaction as compaction;
pub use troupe_host as host;
#[cfg(feature = "mcp")]
pub use troupe_mcp as mcp;
pub use troupe_models as models;
pub use troupe_protocol as protocol;
pub use troupe_runtime as runtime;
pub use troupe_session as session;
pub use troupe_tokens as tokens;
pub use troupe_tools as tools;
#[cfg(feature = "ui")]
pub use troupe_ui as ui;

pub use troupe_agents::{AgentSpec, LlmAgent, spawn_agent, spawn_agent_with};
pub use troupe_protocol::{ChatMessage, ChatModel, Conversation, Event, EventRecord};
pub use troupe_runtime::{AgentRequest, AskError, Team, TeamConfig};
pub use troupe_tools::{Tool, ToolContext, ToolError, ToolRegistry};

/// The traits a program implements — [`Tool`], [`AgentBehavior`](troupe_runtime::AgentBehavior),
/// [`ChatModel`] — or calls through ([`TeamBuilderExt`](troupe_agents::TeamBuilderExt), which
/// gives `Team::builder()`: the builder lives in the agents crate, so it is an extension
/// trait), and [`default_model`]. Types are imported by their one path (`troupe::Team`,
/// `troupe::agents::…`); a prelude of traits is what `use …::*` cannot make ambiguous.
///
/// [`default_model`]: troupe_models::default_model
pub mod prelude {
    pub use troupe_agents::TeamBuilderExt;
    pub use troupe_models::default_model;
    pub use troupe_protocol::ChatModel;
    pub use troupe_runtime::AgentBehavior;
    pub use troupe_tools::Tool;
}

/// The README's code blocks compile against this surface (`cargo test --doc`).
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
