//! What the chat's team is built from: the configuration's agent (or the default model's), its
//! compaction settings and the compression agent's configuration; and the team started from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use troupe::agents::AgentSpec;
use troupe::agents::compression::CompressionConfig;
use troupe::prelude::*;
use troupe::tools::sandbox::Sandbox;
use troupe::{ChatModel, Team, TeamConfig};
use troupe_cli::config::{Config, ServeSection, build_model};

use crate::cli::ChatArgs;

/// Everything needed to (re)build the team.
#[derive(Clone)]
pub(super) struct Blueprint {
    pub(super) spec: AgentSpec,
    pub(super) compression: CompressionConfig,
    /// The sandbox the agent's commands run under, when it runs any (shown by the status line
    /// and `/context`).
    pub(super) sandbox: Option<Sandbox>,
    /// The live view's bounds (`[serve]`).
    pub(super) serve: ServeSection,
}

pub(super) async fn blueprint(args: &ChatArgs) -> anyhow::Result<Blueprint> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let agent_name = match &args.agent {
        Some(name) => name.clone(),
        None if config.agents.len() == 1 => {
            config.agents.keys().next().cloned().unwrap_or_default()
        }
        None if config.agents.is_empty() => "assistant".to_string(),
        // Picking one of several would chat with an agent the user did not choose.
        None => anyhow::bail!(
            "the configuration defines {} agents ({}); choose one with --agent NAME",
            config.agents.len(),
            config.agents.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    let mut models: BTreeMap<String, Arc<dyn ChatModel>> = BTreeMap::new();
    let mut wanted: Vec<String> = config
        .agents
        .get(&agent_name)
        .and_then(|a| config.agent_model_name(a))
        .into_iter()
        .collect();
    // The compaction model the rule chooses is built with the agent's (the only ones loaded).
    wanted.extend(config.compaction_model()?.model_name().map(str::to_string));
    for name in wanted {
        if let Some(model_config) = config.models.get(&name) {
            let spinner = crate::progress::spinner(&format!("loading model `{name}`"));
            models.insert(name.clone(), build_model(&name, model_config).await?);
            spinner.finish_and_clear();
        }
    }
    let default = if models.is_empty() {
        let spinner = crate::progress::spinner("loading the default model");
        let model = troupe::models::default_model()
            .await
            .context("loading the default model")?;
        spinner.finish_and_clear();
        Some(model)
    } else {
        None
    };
    let spec = if config.agents.contains_key(&agent_name) {
        config
            .agent_spec_connected(&agent_name, &models, default.clone())
            .await?
    } else if args.agent.is_some() {
        anyhow::bail!("no agent `{agent_name}` in the configuration");
    } else {
        let model = default
            .clone()
            .or_else(|| models.values().next().cloned())
            .context("no model")?;
        AgentSpec::new(agent_name, model).instructions("You are a helpful, concise assistant.")
    };
    let sandbox = config.command_sandbox(&spec.name);
    let window = spec.model.info().context_window;
    let settings = config.compaction.settings(window);
    let compression = config.compression_config(&models, default.as_ref())?;
    Ok(Blueprint {
        spec: spec.compaction(settings),
        compression,
        sandbox,
        serve: config.serve.clone(),
    })
}

/// Start a team whose agent keeps (and resumes from) the session log at `path`.
pub(super) async fn start_team(blueprint: &Blueprint, path: &Path) -> anyhow::Result<Team> {
    let config = TeamConfig {
        shutdown_grace: Duration::from_secs(1),
        ..TeamConfig::default()
    };
    // Through the builder, as every team troupe starts: its switches (`TROUPE_CASSETTES`)
    // reach the chat's team too.
    Team::builder()
        .config(config)
        .compression(blueprint.compression.clone())
        .agent(blueprint.spec.clone().session(path))
        .start()
        .await
        .with_context(|| format!("resuming the session {}", path.display()))
}

pub(super) fn default_session_path() -> anyhow::Result<PathBuf> {
    let dir = dirs::cache_dir()
        .context("no cache directory; pass --session")?
        .join("troupe")
        .join("sessions");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Ok(dir.join(format!("chat-{stamp}.jsonl")))
}
