//! Scoped compression: wrap a loop of requests in `open_scope` / `close_scope`, and the loop's
//! messages become one summary in the agent's conversation.
//!
//! Run it:
//!
//! ```text
//! cargo run --example scoped_compress                 # default model (local llama.cpp, or OpenAI if configured)
//! cargo run --example scoped_compress -- --scripted   # scripted answers and summaries, no LLM at all
//! ```
//!
//! It shows how `close_scope` finds its model: with none given and none used before it is an
//! error ("compress requires a model but none declared", and the scope stays open); an explicit
//! model is used and remembered; the next `close_scope` without a model uses the last one. A
//! scope with no messages is skipped (`Ok(None)`). The conversation is printed before and after.

use std::sync::Arc;

use anyhow::Context as _;
use troupe::agents::compression::CompressionConfig;
use troupe::agents::{LlmAgent, shared_counter};
use troupe::models::{ScriptedModel, ScriptedReply};

use troupe::prelude::*;
use troupe::{AgentSpec, Team};

const AGENT: &str = "worker";

/// The agent's model and the summarizer given explicitly to `close_scope`.
async fn models(scripted: bool) -> anyhow::Result<(Arc<dyn ChatModel>, Arc<dyn ChatModel>)> {
    if !scripted {
        let model = troupe::models::default_model()
            .await
            .context("loading the default model")?;
        return Ok((model.clone(), model));
    }
    let worker = ScriptedModel::new(
        "scripted-worker",
        [
            ScriptedReply::text("Ready."),
            ScriptedReply::text("Rye: 500 g flour, 350 g water, 10 g salt."),
            ScriptedReply::text("Spelt: 500 g flour, 320 g water, 10 g salt."),
            ScriptedReply::text("Wheat: 500 g flour, 375 g water, 10 g salt."),
            ScriptedReply::text("Rye bakes 50 min at 230 °C."),
            ScriptedReply::text("Spelt bakes 40 min at 220 °C."),
        ],
    )
    .with_fallback("Done.");
    let summarizer = ScriptedModel::new(
        "scripted-summarizer",
        [
            ScriptedReply::text(
                "Recipes for rye, spelt and wheat: 500 g flour and 10 g salt each; water 350, \
                 320 and 375 g.",
            ),
            ScriptedReply::text("Bake times: rye 50 min at 230 °C, spelt 40 min at 220 °C."),
        ],
    );
    Ok((Arc::new(worker), Arc::new(summarizer)))
}

/// Print the agent's conversation, one line per message.
fn print_conversation(team: &Team, title: &str) {
    println!("--- {title}");
    let Some(checkpoint) = team.checkpoint(AGENT) else {
        println!("(no conversation)");
        return;
    };
    for m in checkpoint.conversation.messages() {
        let text = m.text().split_whitespace().collect::<Vec<_>>().join(" ");
        let short: String = text.chars().take(110).collect();
        let more = if short.len() < text.len() { "…" } else { "" };
        println!(
            "{:>9} {:<8} {short}{more}",
            m.role.to_string(),
            format!("{:?}", m.kind)
        );
    }
}

/// One request per item, inside whatever scope is open.
async fn run_loop(team: &Team, items: &[&str]) -> anyhow::Result<()> {
    for item in items {
        let answer = team.ask(AGENT, *item).await?;
        println!("  {item} -> {}", answer.trim());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = troupe::telemetry::init()?;
    let scripted = std::env::args().any(|a| a == "--scripted");
    let (model, summarizer) = models(scripted).await?;
    println!("model: {}", model.info().name);

    let team = Team::builder()
        .compression(CompressionConfig::new(shared_counter()))
        .agent(
            AgentSpec::new(AGENT, model)
                .instructions("You are a baker's assistant. Answer in one short sentence.")
                .max_tokens(64),
        )
        .start()
        .await?;
    team.ask(AGENT, "We will go through bread recipes. Say ready.")
        .await?;

    // 1. No model given and none used before: an error, and the scope stays open.
    println!("\nscope `recipes`:");
    team.agent::<LlmAgent>(AGENT).open_scope("recipes").await?;
    run_loop(
        &team,
        &[
            "Recipe for rye bread?",
            "Recipe for spelt bread?",
            "Recipe for wheat bread?",
        ],
    )
    .await?;
    print_conversation(&team, "before close_scope");
    match team.agent::<LlmAgent>(AGENT).close_scope(None, None).await {
        Ok(_) => println!("unexpected: closed without a model"),
        Err(e) => println!("close_scope(no model) -> error: {e}"),
    }

    // 2. An explicit model: used, and remembered for later scopes.
    let summary = team
        .agent::<LlmAgent>(AGENT)
        .close_scope(Some("Keep every quantity.".into()), Some(summarizer))
        .await?;
    println!("close_scope(explicit model) -> {summary:?}");

    // 3. No model given, one used before: the last one.
    println!("\nscope `baking`:");
    team.agent::<LlmAgent>(AGENT).open_scope("baking").await?;
    run_loop(&team, &["Bake time for rye?", "Bake time for spelt?"]).await?;
    let summary = team
        .agent::<LlmAgent>(AGENT)
        .close_scope(None, None)
        .await?;
    println!("close_scope(last used model) -> {summary:?}");

    // An empty scope is skipped.
    team.agent::<LlmAgent>(AGENT).open_scope("empty").await?;
    let summary = team
        .agent::<LlmAgent>(AGENT)
        .close_scope(None, None)
        .await?;
    println!("\nclose_scope(empty scope) -> {summary:?} (skipped)");

    print_conversation(&team, "after both scopes");
    team.shutdown().await;
    Ok(())
}
