//! `troupe a2a serve`: a config's agents served over A2A 1.0, until Ctrl-C or SIGTERM.

use anyhow::{Context as _, bail};
use troupe::Team;
use troupe::a2a::{A2aServeConfig, ServedAgent, ServerAuth, serve as serve_agents};
use troupe_cli::config::Config;

use crate::cli::A2aServeArgs;
use crate::node_cmd::{stopped, team_of};

/// The callers: one per `--key-env` (named after its variable), or else one with a key made
/// for the run (returned too, to be printed).
fn callers(args: &A2aServeArgs) -> anyhow::Result<(ServerAuth, Option<String>)> {
    let Some((first, rest)) = args.key_env.split_first() else {
        let key = ServerAuth::random_key()?;
        let auth = match &args.api_key_header {
            Some(header) => ServerAuth::api_key(header.clone(), "generated", key.clone()),
            None => ServerAuth::bearer("generated", key.clone()),
        };
        return Ok((auth, Some(key)));
    };
    let mut auth = match &args.api_key_header {
        Some(header) => ServerAuth::api_key_from_env(header.clone(), first)?,
        None => ServerAuth::bearer_from_env(first)?,
    };
    for env in rest {
        auth = auth.with_caller_from_env(env)?;
    }
    Ok((auth, None))
}

pub async fn serve(args: A2aServeArgs) -> anyhow::Result<()> {
    // Read first: a missing key is said before any model is loaded.
    let (auth, made) = callers(&args)?;
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
    let team = team_of(&config, None).await?;
    let result = run(&team, &config, &names, &args, (auth, made)).await;
    team.shutdown().await;
    result
}

async fn run(
    team: &Team,
    config: &Config,
    names: &[String],
    args: &A2aServeArgs,
    (auth, made): (ServerAuth, Option<String>),
) -> anyhow::Result<()> {
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
    if !args.listen.ip().is_loopback()
        && !args
            .public_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://"))
    {
        eprintln!(
            "warning: serving on {} over plain HTTP: keys and messages cross the network readable; put a TLS proxy in front (--public-url https://…)",
            args.listen
        );
    }
    let server = serve_agents(
        team,
        A2aServeConfig {
            public_url: args.public_url.clone(),
            allowed_origins: args.allow_origin.clone(),
            tasks_file: args.tasks.clone(),
            // clap bounds them (1..=10,000 and 1..=1,000,000): they fit any usize troupe runs on.
            max_contexts: usize::try_from(args.max_contexts)?,
            context_idle: std::time::Duration::from_secs(args.context_idle),
            max_context_logs: usize::try_from(args.max_context_logs)?,
            max_context_log_bytes: args.max_context_log_bytes,
            limits: config.serve.limits(),
            ..A2aServeConfig::new(args.listen, agents, auth)
        },
    )
    .await?;
    if let Some(key) = made {
        // Printed once, as the live view's token is: whoever holds it is a caller.
        let sent = match &args.api_key_header {
            Some(header) => format!("{header}: {key}"),
            None => format!("Authorization: Bearer {key}"),
        };
        println!(
            "key: {key} (made for this run: callers send `{sent}`; --key-env VAR takes yours)"
        );
    }
    for name in server.agents() {
        eprintln!("agent `{name}`: {}", server.agent_url(name));
    }
    println!("READY {}", server.addr());
    stopped().await;
    server.shutdown().await;
    Ok(())
}
