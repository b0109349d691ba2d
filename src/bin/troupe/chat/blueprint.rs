//! What the chat's team is built from: the configuration's agent (or the default model's), its
//! compaction settings and the compression agent's configuration; and the team started from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use troupe::agents::compression::CompressionConfig;
use troupe::agents::{AgentSpec, spawn_agent, spawn_compression_agent};
use troupe::{ChatModel, Team, TeamConfig};
use troupe_cli::config::{Config, build_model};

use crate::cli::ChatArgs;

/// Everything needed to (re)build the team.
#[derive(Clone)]
pub(super) struct Blueprint {
    pub(super) spec: AgentSpec,
    pub(super) compression: CompressionConfig,
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
    let window = spec.model.info().context_window;
    let settings = config.compaction.settings(window);
    let compression = config.compression_config(&models, default.as_ref())?;
    Ok(Blueprint {
        spec: spec.compaction(settings),
        compression,
    })
}

/// Start a team whose agent keeps (and resumes from) the session log at `path`.
pub(super) async fn start_team(blueprint: &Blueprint, path: &Path) -> anyhow::Result<Team> {
    let config = TeamConfig {
        shutdown_grace: Duration::from_secs(1),
        ..TeamConfig::default()
    };
    let team = Team::start(config).await?;
    spawn_compression_agent(&team, blueprint.compression.clone()).await?;
    let spec = blueprint.spec.clone().session(path);
    if let Err(e) = spawn_agent(&team, spec).await {
        team.shutdown().await;
        return Err(e).with_context(|| format!("resuming the session {}", path.display()));
    }
    Ok(team)
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
