//! One team across two processes: this process runs the coordinator on one cluster node, a child
//! process (this example re-run with `--worker`) runs the workers on another, both on
//! 127.0.0.1. The coordinator asks the workers by name as if they were local; the example prints
//! the answer and one trace tree merged from both processes' trace files, then stops both.
//!
//! Run it:
//!
//! ```text
//! cargo run --example distributed                 # workers on the default model (local llama.cpp, or OpenAI if configured)
//! cargo run --example distributed -- --scripted   # scripted workers, no LLM at all
//! ```
//!
//! The nodes authenticate with a cookie made fresh for the run (passed to the child in
//! `TROUPE_CLUSTER_COOKIE`); the trace files are written under the system's temp directory.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use troupe::AgentRequest;
use troupe::cluster::{ClusterNode, NodeConfig};
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::protocol::TraceContext;
use troupe::runtime::{AgentContext, AgentError, Checkpoint};
use troupe::telemetry::{TelemetryConfig, TelemetryGuard};
use troupe::{AgentSpec, Team};

const COOKIE_ENV: &str = "TROUPE_CLUSTER_COOKIE";
const TASK: &str = "We are opening a small bakery: announce it with a name and a slogan.";

/// The coordinator, written as code: asks `namer` and `copywriter` — wherever they run — at
/// once, then combines their answers.
struct Coordinator;

#[async_trait::async_trait]
impl AgentBehavior for Coordinator {
    async fn handle(
        &mut self,
        request: AgentRequest,
        ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        let ask = |to: &'static str, text: &'static str| {
            let hop = AgentRequest {
                from: Some(ctx.name.clone()),
                text: text.into(),
                trace: request.trace.child(),
                response_format: None,
                request_id: None,
            };
            ctx.directory.ask(to, hop, Duration::from_secs(300))
        };
        let (name, slogan) = tokio::join!(
            ask("namer", "Suggest one name for a small bakery."),
            ask("copywriter", "Write a one-line slogan for a small bakery.")
        );
        match (name, slogan) {
            (Ok(name), Ok(slogan)) => Ok(format!(
                "Announcing {} — \"{}\"",
                name.trim(),
                slogan.trim()
            )),
            (Err(e), _) | (_, Err(e)) => Err(AgentError::Failed(e.to_string())),
        }
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }
}

/// Each process's trace file. A node stopping is no news here: ractor_cluster's warning that
/// a peer's session closed is kept to the console's `RUST_LOG`, if asked for.
fn telemetry(trace_file: &Path) -> anyhow::Result<TelemetryGuard> {
    let env = TelemetryConfig::from_env();
    Ok(troupe::telemetry::init_with(TelemetryConfig {
        trace_file: Some(trace_file.to_path_buf()),
        console_filter: env
            .console_filter
            .clone()
            .or_else(|| Some("warn,ractor_cluster=error".into())),
        trace_filter: Some("troupe=info,warn,ractor_cluster=error".into()),
        ..env
    })?)
}

/// The worker process: `namer` and `copywriter` on a node, until stdin closes.
async fn worker(scripted: bool, trace_file: &Path) -> anyhow::Result<()> {
    let _telemetry = telemetry(trace_file)?;
    let cookie = std::env::var(COOKIE_ENV).context("the worker needs the cluster cookie")?;
    let (namer, copywriter): (Arc<dyn ChatModel>, Arc<dyn ChatModel>) = if scripted {
        (
            Arc::new(ScriptedModel::new(
                "scripted-namer",
                [ScriptedReply::text("Crumb & Co.")],
            )),
            Arc::new(ScriptedModel::new(
                "scripted-copywriter",
                [ScriptedReply::text("Fresh from our oven to your morning.")],
            )),
        )
    } else {
        let model = troupe::models::default_model()
            .await
            .context("loading the default model")?;
        (model.clone(), model)
    };
    let team = Team::builder()
        .agent(
            AgentSpec::new("namer", namer)
                .instructions("You invent short, friendly shop names. Answer with the name only.")
                .max_tokens(32),
        )
        .agent(
            AgentSpec::new("copywriter", copywriter)
                .instructions("You write one-line slogans. Answer with the slogan only.")
                .max_tokens(48),
        )
        .start()
        .await?;
    let node = ClusterNode::start(&team, NodeConfig::new("workers", cookie)).await?;
    println!("READY {}", node.listen_addr());
    std::io::stdout().flush()?;
    // The coordinator closes our stdin when it is done with us.
    tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()))
        .await??;
    node.shutdown().await;
    team.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let scripted = std::env::args().any(|a| a == "--scripted");
    let dir = std::env::temp_dir().join(format!("troupe-distributed-{}", std::process::id()));
    if std::env::args().any(|a| a == "--worker") {
        let file = std::env::var_os("TROUPE_DISTRIBUTED_TRACE").map_or_else(
            || std::env::temp_dir().join("troupe-distributed-worker.jsonl"),
            PathBuf::from,
        );
        return worker(scripted, &file).await;
    }
    std::fs::create_dir_all(&dir)?;
    let coordinator_trace = dir.join("coordinator.jsonl");
    let worker_trace = dir.join("workers.jsonl");
    let telemetry = telemetry(&coordinator_trace)?;
    // 64 hex digits, as `openssl rand -hex 32` makes them: a node refuses a weaker cookie.
    let cookie = format!(
        "{}{}",
        TraceContext::new_root().id(),
        TraceContext::new_root().id()
    );

    // The second node: this example again, as a child process.
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--worker")
        .args(scripted.then_some("--scripted"))
        .env(COOKIE_ENV, &cookie)
        .env("TROUPE_DISTRIBUTED_TRACE", &worker_trace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the worker process")?;
    let stdout = child.stdout.take().context("the worker's stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let worker_addr = loop {
        match lines.next() {
            Some(line) => {
                if let Some(addr) = line?.strip_prefix("READY ") {
                    break addr.trim().parse()?;
                }
            }
            None => bail!("the worker process exited before it was ready"),
        }
    };
    println!(
        "worker node listening on {worker_addr} (pid {})",
        child.id()
    );

    let team = Team::builder().start().await?;
    // A custom behaviour joins the running team under its name.
    team.spawn(
        "coordinator",
        Arc::new(|_| Ok(Box::new(Coordinator) as Box<dyn AgentBehavior>)),
    )
    .await?;
    let node = ClusterNode::start(&team, NodeConfig::new("coordinator", cookie)).await?;
    let peer = node.connect(worker_addr).await?;
    println!("connected: node `{}` ↔ node `{peer}`\n", node.name());

    println!("task: {TASK}");
    let answer = team.ask("coordinator", TASK).await;
    match &answer {
        Ok(text) => println!("answer: {text}\n"),
        Err(e) => println!("error: {e}\n"),
    }

    // Stop both nodes: the worker leaves when its stdin closes.
    node.shutdown().await;
    team.shutdown().await;
    drop(child.stdin.take());
    let status = child.wait()?;
    telemetry.flush();
    drop(telemetry);
    println!(
        "trace (merged from {} and {}):",
        coordinator_trace.display(),
        worker_trace.display()
    );
    // As `troupe trace coordinator.jsonl workers.jsonl` shows it: one tree per trace.
    println!(
        "{}",
        troupe_cli::trace_tree::render_files(&[&coordinator_trace, &worker_trace])?
    );
    if !status.success() {
        bail!("the worker process exited with {status}");
    }
    answer?;
    Ok(())
}
