//! Give an agent your own tool in a few lines, and watch it call it.
//!
//! Run it:
//!
//! ```text
//! cargo run --example custom_tool                 # default model (local llama.cpp, or OpenAI if configured)
//! cargo run --example custom_tool -- --scripted   # a scripted model that calls the tool deterministically
//! ```

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::{AgentSpec, Team, ToolError, ToolRegistry};

/// Arguments of the `convert_temperature` tool (the doc comments become the JSON schema).
#[derive(Deserialize, JsonSchema)]
struct Celsius {
    /// Degrees Celsius.
    celsius: f64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // ── the custom tool: a name, a description and an async closure ──
    let mut tools = ToolRegistry::new();
    tools.register_fn(
        "convert_temperature",
        "Convert Celsius to Fahrenheit.",
        |a: Celsius| async move {
            Ok::<_, ToolError>(format!("{:.1} °F", a.celsius * 9.0 / 5.0 + 32.0))
        },
    )?;
    // ──────────────────────────────────────────────────────────────────

    let model: Arc<dyn ChatModel> = if std::env::args().any(|a| a == "--scripted") {
        Arc::new(ScriptedModel::new(
            "scripted",
            [
                ScriptedReply::call("convert_temperature", r#"{"celsius": 21.5}"#),
                ScriptedReply::text("21.5 °C is 70.7 °F."),
            ],
        ))
    } else {
        default_model().await?
    };
    println!("model: {}", model.info().name);

    let team = Team::builder()
        .agent(
            AgentSpec::new("assistant", model)
                .instructions("Use the convert_temperature tool to answer temperature questions.")
                .tools(tools)
                .max_turns(4)
                .max_tokens(128),
        )
        .start()
        .await?;
    let mut events = team.subscribe();

    let answer = team
        .ask("assistant", "What is 21.5 degrees Celsius in Fahrenheit?")
        .await;
    team.shutdown().await;
    while let Ok(record) = events.try_recv() {
        if let troupe::Event::ToolCallFinished { tool, is_error, .. } = record.event {
            println!(
                "tool call: {tool} ({})",
                if is_error { "error" } else { "ok" }
            );
        }
    }
    match answer {
        Ok(answer) => println!("answer: {answer}"),
        Err(e) => println!("no answer: {e}"),
    }
    Ok(())
}
