//! `troupe node`: a cluster node hosting the agents of a config, until Ctrl-C or SIGTERM; with
//! `--ui`, a live view of them in the browser.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use troupe::agents::{spawn_agent, spawn_compression_agent};
use troupe::cluster::{ClusterNode, NodeConfig, TlsConfig};
use troupe::{ChatModel, Team, TeamConfig};
use troupe_cli::config::{Config, build_model};

use crate::cli::NodeArgs;

pub async fn run(args: NodeArgs) -> anyhow::Result<()> {
    // Moved out of the environment at start (secrets.rs), like every credential.
    let cookie = troupe::host::credentials::var(&args.cookie_env)
        .filter(|c| !c.is_empty())
        .with_context(|| {
            format!(
                "set the cluster's cookie in ${} (every node of the cluster needs the same one)",
                args.cookie_env
            )
        })?;
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if config.agents.is_empty() {
        bail!("the node would host no agent: name a config with [agents.NAME] (--config)");
    }
    let team = Team::start(TeamConfig::default()).await?;
    if let Err(e) = host_agents(&team, &config).await {
        team.shutdown().await;
        return Err(e);
    }
    let tls = args.tls_cert.map(|cert| TlsConfig {
        cert,
        key: args.tls_key.unwrap_or_default(),
        ca: args.tls_ca.unwrap_or_default(),
        server_name: args.tls_name.unwrap_or_default(),
    });
    let node_config = NodeConfig {
        name: args.name,
        listen: args.listen,
        cookie,
        tls,
    };
    // The log may go to a file nobody reads at start: say it where the operator looks.
    if let Some(warning) = node_config.exposure_warning() {
        eprintln!("warning: {warning}");
    }
    let node = match ClusterNode::start(&team, node_config).await {
        Ok(node) => node,
        Err(e) => {
            team.shutdown().await;
            return Err(e.into());
        }
    };
    for addr in &args.connect {
        match node.connect(*addr).await {
            Ok(peer) => eprintln!("connected to node `{peer}` at {addr}"),
            Err(e) => eprintln!("warning: {e}"),
        }
    }
    eprintln!(
        "node `{}` hosts {}",
        node.name(),
        team.directory().names().join(", ")
    );
    // Before READY, so whoever waits for READY has the view's URL too.
    let view = match crate::ui_cmd::live(&team, args.ui).await {
        Ok(view) => view,
        Err(e) => {
            node.shutdown().await;
            team.shutdown().await;
            return Err(e);
        }
    };
    println!("READY {}", node.listen_addr());
    stopped().await;
    if let Some(view) = view {
        view.shutdown().await;
    }
    node.shutdown().await;
    team.shutdown().await;
    Ok(())
}

/// The config's agents (each with the model it names) and a compression agent for them.
pub(crate) async fn host_agents(team: &Team, config: &Config) -> anyhow::Result<()> {
    let mut models: BTreeMap<String, Arc<dyn ChatModel>> = BTreeMap::new();
    for (name, model_config) in &config.models {
        models.insert(name.clone(), build_model(name, model_config).await?);
    }
    let default = if models.is_empty() {
        Some(
            troupe::models::default_model()
                .await
                .context("loading the default model")?,
        )
    } else {
        None
    };
    // Every configured model is built: the rule's choice is among them.
    spawn_compression_agent(team, config.compression_config(&models, default.as_ref())?).await?;
    for name in config.agents.keys() {
        let spec = config
            .agent_spec_connected(name, &models, default.clone())
            .await?;
        // The config's compaction settings, as `troupe chat` applies them.
        let window = spec.model.info().context_window;
        let spec = spec.compaction(config.compaction.settings(window));
        spawn_agent(team, spec)
            .await
            .with_context(|| format!("starting agent `{name}`"))?;
    }
    Ok(())
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM.
pub(crate) async fn stopped() {
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
