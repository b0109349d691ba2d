//! `troupe a2a serve`: a config's agents served over A2A 1.0, until Ctrl-C or SIGTERM.

use anyhow::{Context as _, bail};
use troupe::{Team, TeamConfig};
use troupe_a2a::{A2aServeConfig, ServedAgent, ServerAuth, serve as serve_agents};
use troupe_cli::config::Config;

use crate::cli::A2aServeArgs;
use crate::node_cmd::{host_agents, stopped};

pub async fn serve(args: A2aServeArgs) -> anyhow::Result<()> {
    // Read first: a missing key is said before any model is loaded.
    let auth = match (&args.key_env, &args.api_key_header) {
        (Some(env), Some(header)) => Some(ServerAuth::api_key_from_env(header.clone(), env)?),
        (Some(env), None) => Some(ServerAuth::bearer_from_env(env)?),
        (None, _) => None,
    };
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if config.agents.is_empty() {
        bail!("there is no agent to serve: name a config with [agents.NAME] (--config)");
    }
    let names: Vec<String> = if args.agents.is_empty() {
        config.agents.keys().cloned().collect()
    } else {
        args.agents.clone()
    };
    let team = Team::start(TeamConfig::default()).await?;
    let result = run(&team, &config, &names, &args, auth).await;
    team.shutdown().await;
    result
}

async fn run(
    team: &Team,
    config: &Config,
    names: &[String],
    args: &A2aServeArgs,
    auth: Option<ServerAuth>,
) -> anyhow::Result<()> {
    host_agents(team, config).await?;
    let mut agents = Vec::new();
    for name in names {
        let agent = ServedAgent::from_team(team, name).await.with_context(|| {
            format!(
                "the config has no agent `{name}` (it has: {})",
                config.agents.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })?;
        agents.push(agent);
    }
    if !args.listen.ip().is_loopback() && auth.is_none() {
        eprintln!(
            "warning: serving on {} without --key-env: anyone who can connect can ask these agents",
            args.listen
        );
    }
    let server = serve_agents(
        team,
        A2aServeConfig {
            auth,
            public_url: args.public_url.clone(),
            tasks_file: args.tasks.clone(),
            // clap bounds them (1..=10,000 and 1..=1,000,000): they fit any usize troupe runs on.
            max_contexts: usize::try_from(args.max_contexts)?,
            context_idle: std::time::Duration::from_secs(args.context_idle),
            max_context_logs: usize::try_from(args.max_context_logs)?,
            max_context_log_bytes: args.max_context_log_bytes,
            ..A2aServeConfig::new(args.listen, agents)
        },
    )
    .await?;
    for name in server.agents() {
        eprintln!("agent `{name}`: {}", server.agent_url(name));
    }
    println!("READY {}", server.addr());
    stopped().await;
    server.shutdown().await;
    Ok(())
}
