//! Writes a trace file of a small team run and shows it the way `troupe trace` does.
//!
//! Run it:
//!
//! ```text
//! cargo run --example traces                         # default model (local llama.cpp, or OpenAI if configured)
//! cargo run --example traces -- --scripted           # a scripted three-agent team, no LLM at all
//! TROUPE_TRACE=run.jsonl cargo run --example traces  # writes (appends to) run.jsonl instead
//! cargo run -- trace target/traces-example.jsonl     # the same tree from the CLI
//! ```
//!
//! With the default model a researcher agent answers from a `lookup` tool: one `invoke_agent`
//! span, its `chat` spans (model, token counts) and the `execute_tool` span between them. With
//! `--scripted` the run is deterministic: a coordinator asks the researcher, who calls the tool
//! twice (one call fails), and a writer — three agents in one trace. Either way every span goes
//! to the file (`target/traces-example.jsonl` unless `TROUPE_TRACE` names one) with `gen_ai.*`
//! attributes, and the tree is printed as `troupe trace` prints it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use schemars::JsonSchema;
use serde::Deserialize;
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::telemetry::TelemetryConfig;
use troupe::{AgentSpec, Team, ToolError, ToolRegistry};

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
            // Lenient about case and wording: a small model may ask for "Sourdough bread".
            if args.topic.to_lowercase().contains("sourdough") {
                Ok("Sourdough needs a 12-hour rise.".to_string())
            } else {
                Err(ToolError::respond(format!(
                    "no notes about `{}`",
                    args.topic
                )))
            }
        },
    )?;
    Ok(tools)
}

/// One researcher on the default model: ask, call `lookup`, answer.
async fn run_researcher() -> anyhow::Result<String> {
    let model = default_model().await.context("loading the default model")?;
    println!("model: {}", model.info().name);
    let team = Team::builder()
        .agent(
            AgentSpec::new("researcher", model)
                .instructions("Answer from the bakery notes: call the lookup tool with a topic.")
                .tools(research_tools()?)
                .max_turns(3)
                .max_tokens(96),
        )
        .start()
        .await?;
    let answer = team
        .ask("researcher", "What do the notes say about sourdough?")
        .await;
    team.shutdown().await;
    Ok(answer?)
}

/// The scripted three-agent team.
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

    let team = Team::builder()
        .agent(AgentSpec::new("coordinator", Arc::new(coordinator)).team_messaging(true))
        .agent(AgentSpec::new("researcher", Arc::new(researcher)).tools(research_tools()?))
        .agent(AgentSpec::new("writer", Arc::new(writer)))
        .start()
        .await?;
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
    let answer = if std::env::args().any(|a| a == "--scripted") {
        run_team().await
    } else {
        run_researcher().await
    };
    // Dropping the guard flushes the file: every span of the run is in it, failed runs too.
    drop(telemetry);
    let answer = answer?;

    println!("team answer: {answer}\n");
    println!("trace file: {}\n", path.display());
    print!("{}", troupe_cli::trace_tree::render_file(&path)?);
    Ok(())
}
