//! An agent using the tools of a real MCP server: `@modelcontextprotocol/server-everything`,
//! started as a child process and spoken to over stdio.
//!
//! `.ci/run` installs the pinned server into `${TROUPE_CI_CACHE:-$HOME/.cache/troupe-ci}`
//! (or set `TROUPE_MCP_EVERYTHING` to its executable); after that this runs offline:
//!
//! ```text
//! cargo run --example mcp_tools -- --scripted   # a scripted model calls everything__get-sum
//! cargo run --example mcp_tools                 # the default model (local llama.cpp, or OpenAI)
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use troupe::agents::model::{ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::{AgentSpec, Team, ToolRegistry};
use troupe_mcp::{McpServerConfig, RegisterMcp};

/// The server's executable: `TROUPE_MCP_EVERYTHING`, else where `.ci/run` installs it.
fn everything_server() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("TROUPE_MCP_EVERYTHING") {
        return Ok(PathBuf::from(path));
    }
    let cache = std::env::var_os("TROUPE_CI_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/troupe-ci")))
        .context("neither TROUPE_CI_CACHE nor HOME is set")?;
    let path = cache.join("npm/node_modules/.bin/mcp-server-everything");
    anyhow::ensure!(
        path.exists(),
        "{} is missing: run .ci/run to install the MCP reference servers, or set \
         TROUPE_MCP_EVERYTHING to server-everything's executable",
        path.display()
    );
    Ok(path)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // ── the MCP server's tools, registered like any others ──
    let mut tools = ToolRegistry::new();
    let server = McpServerConfig::stdio(everything_server()?.display().to_string()).arg("stdio");
    let everything = tools.register_mcp("everything", server).await?;
    // ─────────────────────────────────────────────────────────
    println!("tools from MCP server `{}`:", everything.name());
    for definition in tools.definitions() {
        println!("  {}: {}", definition.name, definition.description);
    }

    let model: Arc<dyn ChatModel> = if std::env::args().any(|a| a == "--scripted") {
        Arc::new(ScriptedModel::new(
            "scripted",
            [
                ScriptedReply::call("everything__get-sum", r#"{"a": 1234, "b": 4321}"#),
                ScriptedReply::text("1234 + 4321 = 5555 (computed by the MCP server's get-sum)."),
            ],
        ))
    } else {
        default_model().await?
    };
    println!("model: {}", model.info().name);

    let team = Team::builder()
        .agent(
            AgentSpec::new("assistant", model)
                .instructions(
                    "Use the everything__get-sum tool to add numbers; never add them yourself.",
                )
                .tools(tools)
                .max_turns(4)
                .max_tokens(128),
        )
        .start()
        .await?;
    let mut events = team.subscribe();

    let answer = team.ask("assistant", "What is 1234 + 4321?").await;
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
