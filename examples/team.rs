//! A coordinator delegates two sub-tasks to two worker agents by name and combines their answers.
//!
//! Run it:
//!
//! ```text
//! cargo run --example team                 # default model (local llama.cpp, or OpenAI if configured)
//! cargo run --example team -- --scripted   # deterministic scripted models, no LLM at all
//! cargo run --example team -- --scripted --ui   # and watch it in the browser (URL printed)
//! RUST_LOG=info cargo run --example team   # log lines at info and above on stderr (default: warnings)
//! TROUPE_TRACE=team.jsonl cargo run --example team -- --scripted && cargo run -- trace team.jsonl
//! ```
//!
//! With `--scripted` or an OpenAI-compatible server (`OPENAI_API_KEY` / `OPENAI_BASE_URL`), the
//! coordinator is an LLM agent that delegates through the `ask_agent` tool. On the local model
//! the workers are LLM agents and the coordinator is a small programmatic behaviour that asks
//! them by name (a 135M model cannot plan delegation reliably): any `AgentBehavior` can be a
//! teammate. The supervisor restarts any agent that fails; every event
//! of the run is summarized at the end.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use troupe::agents::compression::CompressionConfig;
use troupe::agents::shared_counter;
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::runtime::{AgentContext, AgentError, AskItem, Checkpoint};
use troupe::summary::RunSummary;
use troupe::{AgentRequest, Event};
use troupe::{AgentSpec, Team};

/// A coordinator written as code: asks `namer` and `copywriter` concurrently, then combines.
struct Delegator;

#[async_trait::async_trait]
impl AgentBehavior for Delegator {
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
        // No events to publish by hand: the runtime announces every request's start and finish,
        // so the run summary counts this agent too.
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

/// Each agent's streamed text, printed a whole line at a time as `agent> line`: a line when the
/// model ends one, the rest when its call finishes. Agents that generate together then read as
/// one line each instead of their tokens interleaved.
#[derive(Default)]
struct AgentLines {
    /// Per agent, the text of the line it is writing (in the order they began speaking).
    open: Vec<(String, String)>,
}

impl AgentLines {
    fn delta(&mut self, agent: &str, text: &str) {
        let at = match self.open.iter().position(|(name, _)| name == agent) {
            Some(at) => at,
            None => {
                self.open.push((agent.to_string(), String::new()));
                self.open.len() - 1
            }
        };
        let line = &mut self.open[at].1;
        line.push_str(text);
        while let Some(end) = line.find('\n') {
            let done: String = line.drain(..=end).collect();
            print_line(agent, done.trim_end());
        }
    }

    fn finish(&mut self, agent: &str) {
        if let Some(at) = self.open.iter().position(|(name, _)| name == agent) {
            let (name, rest) = self.open.remove(at);
            print_line(&name, &rest);
        }
    }

    fn finish_all(&mut self) {
        for (name, rest) in std::mem::take(&mut self.open) {
            print_line(&name, &rest);
        }
    }
}

fn print_line(agent: &str, line: &str) {
    if !line.trim().is_empty() {
        println!("{agent}> {}", line.trim_start());
    }
}

const TASK: &str = "We are opening a small bakery. Get a name idea from the namer and a slogan \
                    from the copywriter, then combine them into one short announcement.";

/// Models for the three agents: scripted (deterministic) or the default model for all three.
async fn models(scripted: bool) -> anyhow::Result<[Arc<dyn ChatModel>; 3]> {
    if !scripted {
        let model = troupe::models::default_model()
            .await
            .context("loading the default model")?;
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
    let copywriter = ScriptedModel::new(
        "scripted-copywriter",
        [ScriptedReply::text("Fresh from our oven to your morning.")],
    );
    Ok([Arc::new(coordinator), Arc::new(namer), Arc::new(copywriter)])
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Console by RUST_LOG; a JSONL trace file when TROUPE_TRACE is set (flushed when dropped).
    let _telemetry = troupe::telemetry::init()?;
    let scripted = std::env::args().any(|a| a == "--scripted");
    let [coordinator_model, namer_model, copywriter_model] = models(scripted).await?;
    println!("model: {}", coordinator_model.info().name);

    let mut builder = Team::builder()
        .compression(CompressionConfig::new(shared_counter()))
        .agent(
            AgentSpec::new("namer", namer_model)
                .instructions("You invent short, friendly shop names. Answer with the name only.")
                .max_tokens(32),
        )
        .agent(
            AgentSpec::new("copywriter", copywriter_model)
                .instructions("You write one-line slogans. Answer with the slogan only.")
                .max_tokens(48),
        );
    // A model that can plan (scripted, or an OpenAI-compatible server) coordinates through the
    // `ask_agent` tool; the 135M local model gets the programmatic coordinator.
    let llm_coordinator = scripted || troupe::models::openai_configured();
    if llm_coordinator {
        builder = builder.agent(
            AgentSpec::new("coordinator", coordinator_model)
                .instructions(
                    "You coordinate a team. Use the ask_agent tool to ask `namer` for a bakery name \
                     and `copywriter` for a slogan, then answer with one short announcement using \
                     both.",
                )
                .team_messaging(true)
                .max_turns(6)
                .max_tokens(256),
        );
    }
    let team = builder.start().await?;
    if !llm_coordinator {
        // Any `AgentBehavior` joins a running team under its name.
        team.spawn(
            "coordinator",
            Arc::new(|_| Ok(Box::new(Delegator) as Box<dyn AgentBehavior>)),
        )
        .await?;
    }
    let mut events = team.subscribe();
    // `--ui`: the team's live view in the browser, open until Enter once the answer is in.
    let view = if std::env::args().any(|a| a == "--ui") {
        Some(troupe::ui::serve(&team, troupe::ui::UiConfig::default()).await?)
    } else {
        None
    };
    if let Some(view) = &view {
        println!("live view: {}\n(press Enter to start)", view.url());
        std::io::stdin().read_line(&mut String::new())?;
    }

    println!("task: {TASK}\n");
    // Streamed: every agent's text as its model generates it, a whole line at a time under the
    // agent's name (the workers generate together, so their words would interleave token by
    // token on one line), tool calls as they start, then the answer.
    let mut stream = team.ask_stream("coordinator", TASK);
    let mut lines = AgentLines::default();
    let mut answer = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(AskItem::Event(Event::ModelDelta { agent, text })) => lines.delta(&agent, &text),
            Ok(AskItem::Event(Event::ModelCallFinished { agent, .. })) => lines.finish(&agent),
            Ok(AskItem::Event(Event::ToolCallStarted { agent, tool, .. })) => {
                lines.finish(&agent);
                println!("{agent}: [{tool}]");
            }
            Ok(AskItem::Answer(text)) => answer = Some(Ok(text)),
            Ok(_) => {}
            Err(e) => answer = Some(Err(e)),
        }
    }
    lines.finish_all();
    println!();
    if view.is_some() {
        println!("(the view stays open: press Enter to end)");
        std::io::stdin().read_line(&mut String::new())?;
    }
    team.shutdown().await;
    // Every event of the request was published before its answer was sent.
    let mut summary = RunSummary::default();
    while let Ok(record) = events.try_recv() {
        summary.record(&record);
    }

    match answer {
        Some(Ok(answer)) => println!("team answer:\n{answer}\n"),
        Some(Err(e)) => println!("the team could not answer: {e}\n"),
        None => println!("the team's stream ended without an answer\n"),
    }
    println!("trace summary:\n{summary}");
    Ok(())
}
