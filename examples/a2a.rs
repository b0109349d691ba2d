//! A2A both ways: a troupe coordinator asks an A2A agent as a teammate, and a second troupe team
//! asks the first through A2A — three parties talking A2A 1.0 (JSON-RPC) over loopback HTTP.
//!
//! Run it:
//!
//! ```text
//! cargo run --example a2a -- --scripted   # deterministic scripted models, offline, no LLM
//! cargo run --example a2a                 # default model (local llama.cpp, or OpenAI if configured)
//! ```
//!
//! 1. The example starts an A2A agent, `weather`: here a troupe agent served by a team of its own
//!    (`troupe::a2a::serve`), but any A2A 1.0 agent — one written with the official a2a-sdk, ADK,
//!    LangGraph — is reached the same way, by its base URL.
//! 2. Team one's `coordinator` has `weather` as a teammate (`troupe::a2a::join_team` reads its
//!    card): it asks it through its `ask_agent` tool like any teammate, and the remote agent's
//!    text streams into the request's events under its name.
//! 3. Team one's coordinator is served over A2A in turn; team two joins it as `trip-planner` and
//!    asks it — the request crosses two A2A hops and comes back.
//!
//! With `--scripted` or an OpenAI-compatible server (`OPENAI_API_KEY` / `OPENAI_BASE_URL`) the
//! coordinator delegates reliably; the 135M local model may answer without asking.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::StreamExt as _;
use troupe::a2a::{A2aRemote, A2aServeConfig, ServedAgent, ServerAuth, join_team, serve};
use troupe::agents::compression::CompressionConfig;
use troupe::agents::shared_counter;
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::runtime::AskItem;
use troupe::{AgentSpec, ChatModel, Event, Team, TeamConfig};

const QUESTION: &str = "I am going to Lisbon tomorrow. What should I pack?";

/// Loopback, any free port.
fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Models for the weather agent and the coordinator: scripted, or the default model for both.
async fn models(scripted: bool) -> anyhow::Result<(Arc<dyn ChatModel>, Arc<dyn ChatModel>)> {
    if !scripted {
        let model = troupe::models::default_model().await?;
        return Ok((model.clone(), model));
    }
    let weather = ScriptedModel::new("scripted-weather", [])
        .with_fallback("Lisbon tomorrow: sunny, 24 °C, a light wind from the sea.");
    // The coordinator is asked twice (by the example, then by team two through A2A): each time
    // it asks `weather` first, then answers.
    let ask_weather = || {
        ScriptedReply::ToolCalls(vec![(
            "ask_agent".into(),
            r#"{"agent": "weather", "message": "What is the weather in Lisbon tomorrow?"}"#.into(),
        )])
    };
    let answer = || {
        ScriptedReply::text(
            "Sunny and 24 °C: pack light clothes, sunglasses and a thin jacket for the evening breeze.",
        )
    };
    let coordinator = ScriptedModel::new(
        "scripted-coordinator",
        [ask_weather(), answer(), ask_weather(), answer()],
    );
    Ok((Arc::new(weather), Arc::new(coordinator)))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = troupe::telemetry::init()?;
    let scripted = std::env::args().any(|a| a == "--scripted");
    let (weather_model, coordinator_model) = models(scripted).await?;
    println!("model: {}", coordinator_model.info().name);

    // 1. An A2A agent: `weather`, served by a team of its own.
    let weather_team = Team::builder()
        .compression(CompressionConfig::new(shared_counter()))
        .agent(
            AgentSpec::new("weather", weather_model)
                .instructions("You forecast the weather. Answer in one short sentence.")
                .max_tokens(64),
        )
        .start()
        .await?;
    let weather_agent = ServedAgent::from_team(&weather_team, "weather")
        .await
        .ok_or_else(|| anyhow::anyhow!("the weather team has no `weather`"))?;
    // Every A2A server takes a key: here one made for the run, handed to team one's client
    // through the process's credentials (as a key from the environment would be).
    let weather_key = ServerAuth::random_key()?;
    troupe::host::credentials::keep("WEATHER_A2A_KEY", &weather_key);
    let weather_server = serve(
        &weather_team,
        A2aServeConfig::new(
            loopback(),
            vec![weather_agent],
            ServerAuth::bearer("team-one", weather_key),
        ),
    )
    .await?;
    println!(
        "A2A agent `weather` at {}",
        weather_server.agent_url("weather")
    );

    // 2. Team one: a coordinator whose teammate `weather` is that A2A agent.
    let team_one = Team::builder()
        .compression(CompressionConfig::new(shared_counter()))
        .agent(
            AgentSpec::new("coordinator", coordinator_model)
                .instructions(
                    "You help travellers. Ask the `weather` agent (ask_agent tool) about the \
                     weather where they go, then answer with what to pack in one sentence.",
                )
                .team_messaging(true)
                .max_turns(4)
                .max_tokens(128),
        )
        .start()
        .await?;
    let card = join_team(
        &team_one,
        "weather",
        &A2aRemote::new(weather_server.agent_url("weather")).key_env("WEATHER_A2A_KEY"),
    )
    .await?;
    println!(
        "team one: `weather` joined from its card ({}: {})",
        card.name, card.description
    );
    println!("\nteam one asks coordinator: {QUESTION}");
    let mut stream = team_one.ask_stream("coordinator", QUESTION);
    let mut answer = None;
    let mut forecast = String::new();
    while let Some(item) = stream.next().await {
        match item? {
            AskItem::Event(Event::ToolCallStarted { agent, tool, .. }) => {
                println!("  {agent}: [{tool}]");
            }
            // The remote agent's text, streamed over A2A, arrives as its deltas.
            AskItem::Event(Event::ModelDelta { agent, text }) if agent == "weather" => {
                forecast.push_str(&text);
            }
            AskItem::Event(Event::RequestFinished { agent, .. }) if agent == "weather" => {
                println!("  weather (over A2A): {forecast}");
            }
            AskItem::Answer(text) => answer = Some(text),
            _ => {}
        }
    }
    println!("coordinator: {}", answer.unwrap_or_default());

    // 3. Team one's coordinator served over A2A; team two asks it as `trip-planner`.
    let coordinator_agent = ServedAgent::from_team(&team_one, "coordinator")
        .await
        .ok_or_else(|| anyhow::anyhow!("team one has no `coordinator`"))?;
    let team_one_key = ServerAuth::random_key()?;
    troupe::host::credentials::keep("TEAM_ONE_A2A_KEY", &team_one_key);
    let team_one_server = serve(
        &team_one,
        A2aServeConfig::new(
            loopback(),
            vec![coordinator_agent],
            ServerAuth::bearer("team-two", team_one_key),
        ),
    )
    .await?;
    let team_two = Team::start(TeamConfig::default()).await?;
    join_team(
        &team_two,
        "trip-planner",
        &A2aRemote::new(team_one_server.agent_url("coordinator")).key_env("TEAM_ONE_A2A_KEY"),
    )
    .await?;
    println!("\nteam two asks trip-planner (team one's coordinator, over A2A): {QUESTION}");
    let answer = team_two.ask("trip-planner", QUESTION).await?;
    println!("trip-planner: {answer}");

    team_two.shutdown().await;
    team_one_server.shutdown().await;
    team_one.shutdown().await;
    weather_server.shutdown().await;
    weather_team.shutdown().await;
    Ok(())
}
