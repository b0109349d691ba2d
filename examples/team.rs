//! A coordinator delegates two sub-tasks to two worker agents by name and combines their answers.
//!
//! Run it:
//!
//! ```text
//! cargo run --example team                 # default model (local llama.cpp, or OpenAI if configured)
//! cargo run --example team -- --scripted   # deterministic scripted models, no LLM at all
//! RUST_LOG=info cargo run --example team   # with spans and logs on the console
//! ```
//!
//! The coordinator talks to its workers through the `ask_agent` tool; the supervisor restarts any
//! agent that fails; every event of the run is summarized at the end.

use std::sync::Arc;

use anyhow::Context as _;
use troupe::agents::model::{ScriptedModel, ScriptedReply};
use troupe::summary::RunSummary;
use troupe::{AgentSpec, ChatModel, Team, TeamConfig, spawn_agent};

const TASK: &str = "We are opening a small bakery. Get a name idea from the namer and a slogan \
                    from the copywriter, then combine them into one short announcement.";

/// Models for the three agents: scripted (deterministic) or the default model for all three.
async fn models(scripted: bool) -> anyhow::Result<[Arc<dyn ChatModel>; 3]> {
    if !scripted {
        let model = troupe::agents::model::default_model().await.context("loading the default model")?;
        return Ok([model.clone(), model.clone(), model]);
    }
    let coordinator = ScriptedModel::new(
        "scripted-coordinator",
        [
            ScriptedReply::ToolCalls(vec![
                ("ask_agent".into(), r#"{"agent": "namer", "message": "Suggest one name for a small bakery."}"#.into()),
                ("ask_agent".into(), r#"{"agent": "copywriter", "message": "Write a one-line slogan for a small bakery."}"#.into()),
            ]),
            ScriptedReply::text("Announcing Crumb & Co. — \"Fresh from our oven to your morning.\""),
        ],
    );
    let namer = ScriptedModel::new("scripted-namer", [ScriptedReply::text("Crumb & Co.")]);
    let copywriter =
        ScriptedModel::new("scripted-copywriter", [ScriptedReply::text("Fresh from our oven to your morning.")]);
    Ok([Arc::new(coordinator), Arc::new(namer), Arc::new(copywriter)])
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let scripted = std::env::args().any(|a| a == "--scripted");
    let [coordinator_model, namer_model, copywriter_model] = models(scripted).await?;
    println!("model: {}", coordinator_model.info().name);

    let team = Team::start(TeamConfig::default()).await?;
    let mut events = team.subscribe();

    spawn_agent(
        &team,
        AgentSpec::new("coordinator", coordinator_model)
            .instructions(
                "You coordinate a team. Use the ask_agent tool to ask `namer` for a bakery name and \
                 `copywriter` for a slogan, then answer with one short announcement using both.",
            )
            .team_messaging(true)
            .max_turns(6)
            .max_tokens(256),
    )
    .await?;
    spawn_agent(
        &team,
        AgentSpec::new("namer", namer_model)
            .instructions("You invent short, friendly shop names. Answer with the name only.")
            .max_tokens(32),
    )
    .await?;
    spawn_agent(
        &team,
        AgentSpec::new("copywriter", copywriter_model)
            .instructions("You write one-line slogans. Answer with the slogan only.")
            .max_tokens(48),
    )
    .await?;

    println!("task: {TASK}\n");
    let answer = team.ask("coordinator", TASK).await;
    team.shutdown().await;
    // Every event of the request was published before its answer was sent.
    let mut summary = RunSummary::default();
    while let Ok(record) = events.try_recv() {
        summary.record(&record);
    }

    match answer {
        Ok(answer) => println!("team answer:\n{answer}\n"),
        Err(e) => println!("the team could not answer: {e}\n"),
    }
    println!("trace summary:\n{summary}");
    Ok(())
}
