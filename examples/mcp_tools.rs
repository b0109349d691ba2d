//! An agent using the tools of a real MCP server, started as a child process and spoken to over
//! stdio: the reference server `@modelcontextprotocol/server-everything` through `npx` when
//! Node.js is installed, else the reference server `mcp-server-time` from PyPI when Python 3 is.
//!
//! Run it:
//!
//! ```text
//! cargo run --example mcp_tools -- --scripted   # a scripted model calls the server's tool
//! cargo run --example mcp_tools                 # the default model (local llama.cpp, or OpenAI)
//! ```
//!
//! The server is the first of these that can work (the versions are the ones `.ci/run` pins):
//!
//! 1. `TROUPE_MCP_EVERYTHING` (or `TROUPE_MCP_TIME`): the executable of an installed server;
//!    `.ci/run` sets both.
//! 2. `npx -y @modelcontextprotocol/server-everything@2026.8.31 stdio`, as an MCP host's config
//!    starts it; the first run downloads it from the npm registry into npm's cache. The scripted
//!    model calls `everything__get-sum`.
//! 3. `mcp-server-time==2026.10.19`, installed with pip into a virtualenv this example makes once
//!    under the build's `target/` folder (`target/debug/mcp-servers/`); the first run downloads
//!    it from PyPI. The scripted model calls `time__get_current_time`.
//!
//! With none of them it says in one line what to install. A download that fails or stalls is an
//! error naming the step, never a hang.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use tokio::process::Command;
use troupe::mcp::{McpServerConfig, RegisterMcp};
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::protocol::Role;
use troupe::{AgentSpec, Team, ToolRegistry};

/// The npm reference server and the version `.ci/run` pins (`MCP_EVERYTHING_VERSION`).
const EVERYTHING_PACKAGE: &str = "@modelcontextprotocol/server-everything";
const EVERYTHING_VERSION: &str = "2026.8.31";
/// The PyPI reference server and the version `.ci/run` pins (`MCP_TIME_VERSION`).
const TIME_PACKAGE: &str = "mcp-server-time";
const TIME_VERSION: &str = "2026.10.19";

/// npx's first run downloads the server before it can answer `initialize`; npm itself gives up
/// on an unreachable registry after about a minute.
const NPX_START: Duration = Duration::from_secs(180);
/// Making the virtualenv, and installing the server into it.
const VENV_LIMIT: Duration = Duration::from_secs(120);
const PIP_LIMIT: Duration = Duration::from_secs(300);

const AGENT: &str = "assistant";

/// Which reference server runs, and what the agent is asked of it.
#[derive(Clone, Copy)]
enum Reference {
    Everything,
    Time,
}

impl Reference {
    /// The name its tools are registered under (`everything__get-sum`, `time__…`).
    fn name(self) -> &'static str {
        match self {
            Reference::Everything => "everything",
            Reference::Time => "time",
        }
    }

    fn instructions(self) -> &'static str {
        match self {
            Reference::Everything => {
                "Use the everything__get-sum tool to add numbers; never add them yourself."
            }
            Reference::Time => "Use the time__get_current_time tool for the time; never guess it.",
        }
    }

    fn question(self) -> &'static str {
        match self {
            Reference::Everything => "What is 1234 + 4321?",
            Reference::Time => "What time is it in Tokyo?",
        }
    }

    /// The scripted model: one call of the server's tool, then an answer.
    fn script(self) -> [ScriptedReply; 2] {
        match self {
            Reference::Everything => [
                ScriptedReply::call("everything__get-sum", r#"{"a": 1234, "b": 4321}"#),
                ScriptedReply::text("1234 + 4321 = 5555 (computed by the MCP server's get-sum)."),
            ],
            Reference::Time => [
                ScriptedReply::call("time__get_current_time", r#"{"timezone": "Asia/Tokyo"}"#),
                ScriptedReply::text("The MCP server's get_current_time says what time it is."),
            ],
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (reference, server) = reference_server().await?;
    println!("server: {}", server.command_line());

    // ── the MCP server's tools, registered like any others ──
    let mut tools = ToolRegistry::new();
    let mcp = tools.register_mcp(reference.name(), server).await?;
    // ─────────────────────────────────────────────────────────
    println!("tools from MCP server `{}`:", mcp.name());
    for definition in tools.definitions() {
        println!("  {}: {}", definition.name, definition.description);
    }

    let model: Arc<dyn ChatModel> = if std::env::args().any(|a| a == "--scripted") {
        Arc::new(ScriptedModel::new("scripted", reference.script()))
    } else {
        default_model().await?
    };
    println!("model: {}", model.info().name);

    let team = Team::builder()
        .agent(
            AgentSpec::new(AGENT, model)
                .instructions(reference.instructions())
                .tools(tools)
                .max_turns(4)
                .max_tokens(128),
        )
        .start()
        .await?;
    let mut events = team.subscribe();

    let answer = team.ask(AGENT, reference.question()).await;
    let conversation = team.checkpoint(AGENT).map(|c| c.conversation);
    team.shutdown().await;
    while let Ok(record) = events.try_recv() {
        if let troupe::Event::ToolCallFinished { tool, is_error, .. } = record.event {
            println!(
                "tool call: {tool} ({})",
                if is_error { "error" } else { "ok" }
            );
        }
    }
    // What the server answered, as the model read it (on one line).
    for message in conversation.iter().flat_map(|c| c.messages()) {
        if message.role == Role::Tool {
            let text = message.text();
            println!(
                "tool result: {}",
                text.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
    }
    match answer {
        Ok(answer) => println!("answer: {answer}"),
        Err(e) => println!("no answer: {e}"),
    }
    Ok(())
}

/// The reference server to start: the first of the roads in this file's header that can work.
async fn reference_server() -> anyhow::Result<(Reference, McpServerConfig)> {
    if let Some(path) = env_path("TROUPE_MCP_EVERYTHING") {
        return Ok((
            Reference::Everything,
            McpServerConfig::stdio(path).arg("stdio"),
        ));
    }
    if let Some(path) = env_path("TROUPE_MCP_TIME") {
        return Ok((Reference::Time, McpServerConfig::stdio(path)));
    }
    if on_path("npx") && on_path("node") {
        return Ok((Reference::Everything, npx_everything()));
    }
    if let Some(python) = python_with_venv().await {
        let server = time_server_in_venv(&python).await?;
        return Ok((
            Reference::Time,
            McpServerConfig::stdio(server.display().to_string()),
        ));
    }
    bail!(
        "mcp_tools starts its MCP server with npx or with python3's venv, and neither is here: \
         install Node.js (npm's npx), or Python 3 with venv (python3-venv on Debian/Ubuntu)"
    )
}

/// A variable naming a server's executable, when set and not empty.
fn env_path(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|path| !path.is_empty())
}

/// Whether `program` is a file in one of `PATH`'s folders.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// server-everything through `npx -y`, the way an MCP host's config starts it.
fn npx_everything() -> McpServerConfig {
    let mut server = McpServerConfig::stdio("npx")
        .args([
            "-y".to_string(),
            format!("{EVERYTHING_PACKAGE}@{EVERYTHING_VERSION}"),
            "stdio".to_string(),
        ])
        .init_timeout(NPX_START);
    // A server inherits only a few variables (PATH, HOME, …); npm's own settings (registry,
    // cache) and a proxy must reach npx for its download to work where they are needed.
    for (key, value) in std::env::vars() {
        let lower = key.to_ascii_lowercase();
        if lower.starts_with("npm_config_")
            || matches!(lower.as_str(), "http_proxy" | "https_proxy" | "no_proxy")
            || key == "NODE_EXTRA_CA_CERTS"
        {
            server = server.env(key, value);
        }
    }
    server
}

/// The interpreter behind `python3` when it can make a virtualenv (Debian's python3 needs
/// python3-venv): its real path, since a virtualenv links to the path it was made with and a
/// link or shim in `PATH` may not last.
async fn python_with_venv() -> Option<PathBuf> {
    let mut probe = Command::new("python3");
    probe
        .args([
            "-c",
            "import os, sys, venv, ensurepip; print(os.path.realpath(sys.executable))",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(VENV_LIMIT, probe.output())
        .await
        .ok()?
        .ok()?;
    let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
    (output.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
}

/// `mcp-server-time`'s executable in this example's virtualenv, made and installed once.
async fn time_server_in_venv(python: &Path) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding this example's binary")?;
    // target/debug/examples/mcp_tools -> target/debug: the build's own folder, which
    // `cargo clean` empties.
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .context("this example's binary has no parent folder")?;
    let venv = profile
        .join("mcp-servers")
        .join(format!("{TIME_PACKAGE}-{TIME_VERSION}"));
    let server = venv.join("bin").join(TIME_PACKAGE);
    // Written after pip succeeds: a venv whose install was interrupted, or whose interpreter
    // is gone, is made again.
    let installed = venv.join("installed");
    if installed.is_file() && server.is_file() && venv.join("bin").join("python3").exists() {
        return Ok(server);
    }
    println!(
        "installing {TIME_PACKAGE}=={TIME_VERSION} from PyPI into {} (once)",
        venv.display()
    );
    let mut make = Command::new(python);
    make.args(["-m", "venv", "--clear"]).arg(&venv);
    run(make, VENV_LIMIT, "python3 -m venv").await?;
    let mut pip = Command::new(venv.join("bin").join("pip"));
    pip.args([
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--timeout",
        "30",
        &format!("{TIME_PACKAGE}=={TIME_VERSION}"),
    ]);
    let what = format!("pip install {TIME_PACKAGE}=={TIME_VERSION} (from PyPI)");
    run(pip, PIP_LIMIT, &what).await?;
    std::fs::write(&installed, format!("{TIME_PACKAGE}=={TIME_VERSION}\n"))
        .with_context(|| format!("writing {}", installed.display()))?;
    Ok(server)
}

/// Run one install step to its end within `limit`: killed past it, an error naming `what`.
async fn run(mut command: Command, limit: Duration, what: &str) -> anyhow::Result<()> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(limit, command.output())
        .await
        .map_err(|_| anyhow::anyhow!("{what} did not finish within {} s", limit.as_secs()))?
        .with_context(|| format!("cannot run {what}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    ensure!(
        output.status.success(),
        "{what} failed ({}){}",
        output.status,
        last.map(|l| format!(": {}", l.trim())).unwrap_or_default()
    );
    Ok(())
}
