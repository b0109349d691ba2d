//! The requests in troupe, as its README builds a team: `Team::builder()` with `LlmAgent`s
//! over the OpenAI-compatible provider, two tools from `ToolRegistry::register_fn`, one agent
//! per conversation (`Team::spawn_many`), each request a `Team::ask`.
//!
//! Two roads. **Lean**: the agents alone — no one reads the event bus, no trace subscriber, no
//! budget, no session log. **Full**: what a production team runs with — the compression agent,
//! a task reading every event (as the CLI's progress display does), the JSONL trace file
//! (`troupe::telemetry`, every span of every request written as it closes), a budget on every
//! agent (request, agent and team limits checked before each model call), and a session log per
//! agent with durable steps: each model answer and tool result committed — records, a commit
//! line, an fsync — as it completes.

use std::path::PathBuf;
use std::sync::Arc;

use troupe::agents::compression::CompressionConfig;
use troupe::agents::spend::AgentBudget;
use troupe::models::{OpenAiConfig, OpenAiModel};
use troupe::prelude::*;
use troupe::protocol::SpendLimit;
use troupe::runtime::budget::TeamSpend;
use troupe::telemetry::{TelemetryConfig, TelemetryGuard};
use troupe::{AgentSpec, LlmAgent, Team, ToolError, ToolRegistry};

use super::{
    CityArgs, FINAL_ANSWER, MODEL, SYSTEM_PROMPT, TIME_TOOL, USER_MESSAGE, WEATHER_TOOL,
    local_time, weather,
};

/// A running troupe team serving the load.
pub struct TroupeLoad {
    team: Team,
    model: Arc<dyn ChatModel>,
    full: Option<FullRoad>,
}

/// What the full road holds on to.
struct FullRoad {
    /// Session logs go here, one per agent (removed when the run ends).
    dir: PathBuf,
    team_spend: TeamSpend,
    /// Flushes the trace file when dropped.
    _telemetry: TelemetryGuard,
}

fn tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools
        .register_fn(
            WEATHER_TOOL,
            "The weather in a city.",
            |args: CityArgs| async move { Ok::<String, ToolError>(weather(&args.city)) },
        )
        .expect("a valid tool");
    tools
        .register_fn(
            TIME_TOOL,
            "The local time in a city.",
            |args: CityArgs| async move { Ok::<String, ToolError>(local_time(&args.city)) },
        )
        .expect("a valid tool");
    tools
}

impl TroupeLoad {
    /// The team with its first agent, `c0`. `full` turns on every guarantee, its files under
    /// `dir`.
    pub async fn start(base_url: &str, full: bool, dir: PathBuf) -> Self {
        let model: Arc<dyn ChatModel> = Arc::new(
            OpenAiModel::new(OpenAiConfig::new(base_url, MODEL)).expect("an OpenAI client"),
        );
        let full = full.then(|| {
            std::fs::create_dir_all(&dir).expect("the run's directory");
            let telemetry = troupe::telemetry::init_with(TelemetryConfig {
                trace_file: Some(dir.join("trace.jsonl")),
                ..TelemetryConfig::default()
            })
            .expect("the trace file");
            FullRoad {
                dir,
                team_spend: TeamSpend::new(SpendLimit {
                    input_tokens: Some(u64::MAX / 2),
                    ..SpendLimit::default()
                }),
                _telemetry: telemetry,
            }
        });
        let first = spec(&model, full.as_ref(), 0);
        let mut builder = Team::builder();
        if full.is_some() {
            builder = builder.compression(CompressionConfig::default());
        }
        let team = builder.agent(first).start().await.expect("a team");
        if full.is_some() {
            let mut events = team.subscribe();
            // The reader a progress display is: every event is received and looked at.
            tokio::spawn(async move {
                loop {
                    match events.recv().await {
                        Ok(event) => {
                            std::hint::black_box(&event);
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                    }
                }
            });
        }
        TroupeLoad { team, model, full }
    }

    /// Agents `c1..=cn`, one per measured request, in one supervisor message.
    pub async fn prepare(&self, n: usize) {
        let agents = (1..=n).map(|i| {
            let spec = spec(&self.model, self.full.as_ref(), i);
            (format!("c{i}"), LlmAgent::factory(spec))
        });
        for spawned in self.team.spawn_many(agents).await.expect("spawned") {
            spawned.expect("an agent spawned");
        }
    }

    /// Request `i`: ask agent `ci` and wait for its answer.
    pub async fn request(&self, i: usize) -> Result<(), String> {
        let answer = self
            .team
            .ask(&format!("c{i}"), USER_MESSAGE)
            .await
            .map_err(|e| e.to_string())?;
        if answer == FINAL_ANSWER {
            Ok(())
        } else {
            Err(format!("unexpected answer: {answer}"))
        }
    }

    /// Stop the team (and remove the full road's files).
    pub async fn shutdown(self) {
        self.team.shutdown().await;
        if let Some(full) = self.full {
            let _ = std::fs::remove_dir_all(&full.dir);
        }
    }
}

/// The spec of conversation `i`'s agent; on the full road with its session log and budget.
fn spec(model: &Arc<dyn ChatModel>, full: Option<&FullRoad>, i: usize) -> AgentSpec {
    let spec = AgentSpec::new(format!("c{i}"), model.clone())
        .instructions(SYSTEM_PROMPT)
        .tools(tools());
    match full {
        None => spec,
        Some(full) => spec
            .session(full.dir.join(format!("c{i}.jsonl")))
            .budget(AgentBudget {
                request: SpendLimit {
                    input_tokens: Some(1_000_000),
                    ..SpendLimit::default()
                },
                agent: SpendLimit {
                    output_tokens: Some(1_000_000),
                    ..SpendLimit::default()
                },
                team: Some(full.team_spend.clone()),
                ..AgentBudget::default()
            }),
    }
}
