//! `troupe node`: a cluster node hosting the agents of a config, until Ctrl-C or SIGTERM; with
//! `--ui`, a live view of them in the browser.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use troupe::cluster::{ClusterNode, HEARTBEAT_DEADLINE, NodeConfig, TlsConfig};
use troupe::prelude::*;
use troupe::session::SessionStore;
use troupe::{ChatModel, Team};
use troupe_cli::config::{Config, build_model};

use crate::cli::NodeArgs;
use crate::store_arg::StoreArg;

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
    if let Some(unknown) = args
        .standby
        .iter()
        .find(|name| !config.agents.contains_key(*name))
    {
        bail!("--standby {unknown}: the config names no agent `{unknown}` ([agents.{unknown}])");
    }
    let lease = args.lease_ms.map(std::time::Duration::from_millis);
    // Opened before the team: an unreachable store fails the node before it hosts anything.
    let store = match &args.store {
        Some(arg) => Some(LogStore {
            store: arg.open(&args.name, lease)?,
            arg: arg.clone(),
        }),
        None => None,
    };
    if !args.standby.is_empty()
        && !matches!(
            store.as_ref().map(|s| &s.arg),
            Some(StoreArg::Postgres(_) | StoreArg::PostgresEnv(_))
        )
    {
        bail!("--standby needs a store every node reaches: --store postgres://… (or env:VAR)");
    }
    let (team, standbys) = team_and_standbys(&config, store.as_ref(), &args.standby).await?;
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
        failover: std::time::Duration::from_millis(args.failover_ms),
        heartbeat_deadline: args
            .heartbeat_ms
            .map_or(HEARTBEAT_DEADLINE, std::time::Duration::from_millis),
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
    let view = match crate::ui_cmd::live(&team, args.ui, &config.serve).await {
        Ok(view) => view,
        Err(e) => {
            node.shutdown().await;
            team.shutdown().await;
            return Err(e);
        }
    };
    let (took, mut taken) = tokio::sync::mpsc::channel(4);
    let every = lease.unwrap_or(std::time::Duration::from_secs(10)) / 3;
    let watchers: Vec<_> = standbys
        .into_iter()
        .map(|standby| {
            tokio::spawn(crate::standby::watch(
                crate::standby::TeamParts {
                    spawner: team.spawner(),
                    directory: team.directory().clone(),
                    events: team.events().clone(),
                },
                node.name().to_string(),
                standby,
                every,
                took.clone(),
            ))
        })
        .collect();
    drop(took);
    println!("READY {}", node.listen_addr());
    let stop = stopped();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            Some(done) = taken.recv() => {
                if let Err(e) = node.publish(&done.agent) {
                    eprintln!("warning: {e}");
                }
                let _ = done.published.send(());
            }
        }
    }
    for watcher in watchers {
        watcher.abort();
    }
    if let Some(view) = view {
        view.shutdown().await;
    }
    node.shutdown().await;
    team.shutdown().await;
    Ok(())
}

/// Where a node's agents keep their session logs (`--store`).
pub(crate) struct LogStore {
    store: SessionStore,
    arg: StoreArg,
}

/// A team of the config's agents (each with the model it names, and its log in `store` when
/// given) and a compression agent for them, started through the builder as every team troupe
/// starts, so its switches (`TROUPE_CASSETTES`) reach a node's and a served team's agents too.
pub(crate) async fn team_of(config: &Config, store: Option<&LogStore>) -> anyhow::Result<Team> {
    Ok(team_and_standbys(config, store, &[]).await?.0)
}

/// [`team_of`] without the agents named in `standby`: those come back as what a takeover
/// starts (their spec, their log in `store`).
pub(crate) async fn team_and_standbys(
    config: &Config,
    store: Option<&LogStore>,
    standby: &[String],
) -> anyhow::Result<(Team, Vec<crate::standby::Standby>)> {
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
    let mut builder =
        Team::builder().compression(config.compression_config(&models, default.as_ref())?);
    let mut standbys = Vec::new();
    for name in config.agents.keys() {
        let spec = config
            .agent_spec_connected(name, &models, default.clone())
            .await?;
        // The config's compaction settings, as `troupe chat` applies them.
        let window = spec.model.info().context_window;
        let mut spec = spec.compaction(config.compaction.settings(window));
        if let Some(logs) = store {
            let log = logs.arg.agent_log(name);
            eprintln!(
                "agent `{name}` keeps its session log `{}` in {}",
                log.display(),
                logs.store.describe()
            );
            spec = spec.session(&log).session_store(logs.store.clone());
            if standby.contains(name) {
                standbys.push(crate::standby::Standby {
                    spec,
                    log,
                    store: logs.store.clone(),
                });
                continue;
            }
        }
        builder = builder.agent(spec);
    }
    Ok((builder.start().await?, standbys))
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
