//! Ask an agent for a typed value instead of text: `team.ask_typed::<City>(…)` sends `City`'s
//! JSON Schema with every model call of the request, parses the answer into `City`, and asks
//! once more with the error when the answer does not fit.
//!
//! Run it:
//!
//! ```text
//! cargo run --example structured_output                 # the embedded model (SmolLM2-135M), its output held to the schema by a grammar
//! cargo run --example structured_output -- --scripted   # a scripted model: a wrong answer first, then the retry
//! ```
//!
//! On an OpenAI-compatible server (`OPENAI_API_KEY`, `OPENAI_BASE_URL`) the schema travels as
//! `response_format: {type: "json_schema", …}`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::runtime::typed::TypedAnswerError;
use troupe::{AgentSpec, Team};

/// A city, as the agent describes it (the doc comments become the schema's descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct City {
    /// The city's name.
    // Bounded lengths and numbers keep a tiny model's grammar-constrained output short.
    #[schemars(length(max = 40))]
    name: String,
    /// The country it is in.
    #[schemars(length(max = 40))]
    country: String,
    /// About how many people live there.
    #[schemars(range(max = 100_000_000))]
    population: u32,
    /// Its size class.
    size: Size,
}

/// How big a place is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Size {
    Village,
    Town,
    City,
    Metropolis,
}

/// The scripted model's answers: first the population in words (not a `u32`, so the typed ask
/// answers with the error and asks again), then a `City`.
fn script() -> [ScriptedReply; 2] {
    [
        ScriptedReply::text(
            r#"{"name": "Paris", "country": "France", "population": "about two million", "size": "metropolis"}"#,
        ),
        ScriptedReply::text(
            r#"{"name": "Paris", "country": "France", "population": 2100000, "size": "metropolis"}"#,
        ),
    ]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let scripted = std::env::args()
        .any(|a| a == "--scripted")
        .then(|| Arc::new(ScriptedModel::new("scripted", script())));
    let model: Arc<dyn ChatModel> = match &scripted {
        Some(scripted) => scripted.clone(),
        None => default_model().await?,
    };
    println!("model: {}", model.info().name);

    let team = Team::builder()
        .agent(
            AgentSpec::new("geographer", model)
                .instructions("You describe cities as JSON.")
                .max_tokens(128),
        )
        .start()
        .await?;
    let mut events = team.subscribe();
    let city = team
        .ask_typed::<City>("geographer", "Describe the city of Paris.")
        .await;
    team.shutdown().await;

    let mut calls = 0;
    while let Ok(record) = events.try_recv() {
        if let troupe::Event::ModelCallFinished { .. } = record.event {
            calls += 1;
        }
    }
    println!("model calls: {calls}");
    // The retry, as the model saw it: the error after its wrong answer.
    if let Some(retry) = scripted
        .as_ref()
        .and_then(|m| m.requests().into_iter().nth(1))
    {
        let correction = retry.messages.last().map(|m| m.text()).unwrap_or_default();
        println!("asked again with: {correction}");
    }
    match city {
        Ok(city) => println!(
            "answer: {} ({}): about {} people, size {:?}",
            city.name, city.country, city.population, city.size
        ),
        Err(TypedAnswerError::Mismatch { field, message, .. }) => {
            println!("no City: the answer is wrong at `{field}`: {message}")
        }
        Err(e) => println!("no answer: {e}"),
    }
    Ok(())
}
