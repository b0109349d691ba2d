//! Writes a trace file of a small team run and shows it the way `troupe trace` does.
//!
//! Run it:
//!
//! ```text
//! cargo run --example traces                              # writes target/traces-example.jsonl
//! TROUPE_TRACE=run.jsonl cargo run --example traces       # writes (appends to) run.jsonl
//! cargo run -- trace target/traces-example.jsonl          # the same tree from the CLI
//! ```
//!
//! The team is scripted (no LLM), so the run is deterministic and offline: a coordinator asks a
//! researcher, who calls a tool twice (one call fails), and a writer; every agent invocation,
//! model call and tool call becomes a span in the file, with `gen_ai.*` attributes.

use std::path::PathBuf;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use troupe::agents::model::{ScriptedModel, ScriptedReply};
use troupe::telemetry::TelemetryConfig;
use troupe::{AgentSpec, Team, TeamConfig, ToolError, ToolRegistry, spawn_agent};

#[derive(Deserialize, JsonSchema)]
struct Lookup {
    /// What to look up.
    topic: String,
}

fn research_tools() -> anyhow::Result<ToolRegistry> {
    let mut tools = ToolRegistry::new();
    tools.register_fn(
        "lookup",
        "Look a topic up in the bakery notes.",
        |args: Lookup| async move {
            match args.topic.as_str() {
                "sourdough" => Ok("Sourdough needs a 12-hour rise.".to_string()),
                other => Err(ToolError::respond(format!("no notes about `{other}`"))),
            }
        },
    )?;
    Ok(tools)
}

async fn run_team() -> anyhow::Result<String> {
    let coordinator = ScriptedModel::new(
        "scripted-coordinator",
        [
            ScriptedReply::call(
                "ask_agent",
                r#"{"agent": "researcher", "message": "What do we know about sourdough?"}"#,
            ),
            ScriptedReply::call(
                "ask_agent",
                r#"{"agent": "writer", "message": "One line about a 12-hour sourdough."}"#,
            ),
            ScriptedReply::text("Our sourdough rises for 12 hours: slow bread, fast smiles."),
        ],
    );
    let researcher = ScriptedModel::new(
        "scripted-researcher",
        [
            ScriptedReply::ToolCalls(vec![
                ("lookup".into(), r#"{"topic": "sourdough"}"#.into()),
                ("lookup".into(), r#"{"topic": "croissants"}"#.into()),
            ]),
            ScriptedReply::text("Sourdough needs a 12-hour rise; no notes on croissants."),
        ],
    );
    let writer = ScriptedModel::new(
        "scripted-writer",
        [ScriptedReply::text("Slow bread, fast smiles.")],
    );

    let team = Team::start(TeamConfig::default()).await?;
    spawn_agent(
        &team,
        AgentSpec::new("coordinator", Arc::new(coordinator)).team_messaging(true),
    )
    .await?;
    spawn_agent(
        &team,
        AgentSpec::new("researcher", Arc::new(researcher)).tools(research_tools()?),
    )
    .await?;
    spawn_agent(&team, AgentSpec::new("writer", Arc::new(writer))).await?;
    let answer = team
        .ask("coordinator", "Write one line for our sourdough sign.")
        .await;
    team.shutdown().await;
    Ok(answer?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // TROUPE_TRACE wins; otherwise write a fresh file under target/.
    let mut config = TelemetryConfig::from_env();
    let path = match &config.trace_file {
        Some(path) => path.clone(),
        None => {
            let path = PathBuf::from("target/traces-example.jsonl");
            // A fresh file each run, so the tree shows this run only.
            let _ = std::fs::remove_file(&path);
            config.trace_file = Some(path.clone());
            path
        }
    };
    let telemetry = troupe::telemetry::init_with(config)?;
    let answer = run_team().await?;
    // Dropping the guard flushes the file: every span of the run is in it.
    drop(telemetry);

    println!("team answer: {answer}\n");
    println!("trace file: {}\n", path.display());
    print!("{}", troupe::trace_tree::render_file(&path)?);
    Ok(())
}
