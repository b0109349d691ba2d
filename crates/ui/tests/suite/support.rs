//! A scripted team to watch, and HTTP helpers that speak to the view as a browser would.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::{AgentSpec, CompactionSettings, TeamBuilderExt as _, shared_counter};
use troupe_compaction::ContextPolicy;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{ChatModel, ChatRequest, ChatStream, ModelError, ModelInfo};
use troupe_runtime::{Team, TeamConfig};
use troupe_tools::ToolRegistry;
use troupe_tools::approval::{ApprovalPolicy, ApprovalRule, Permission};

/// The commands the `run` tool ran.
pub type Runs = Arc<Mutex<Vec<String>>>;

/// The answer with markup a hostile model might write.
pub const HOSTILE: &str =
    "Here: <script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\"> done";

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct RunArgs {
    command: String,
}

/// A `run` tool that records each command it runs.
pub fn run_tool(runs: &Runs) -> ToolRegistry {
    let runs = runs.clone();
    let mut tools = ToolRegistry::new();
    tools
        .register_fn("run", "Run a command.", move |args: RunArgs| {
            let runs = runs.clone();
            async move {
                runs.lock().unwrap().push(args.command.clone());
                Ok(format!("ran {}", args.command))
            }
        })
        .unwrap();
    tools
}

/// A model that takes its time, so a person (or a browser test polling the page) sees the
/// agent calling it.
pub struct Slow {
    model: Arc<ScriptedModel>,
    delay: Duration,
}

#[async_trait::async_trait]
impl ChatModel for Slow {
    fn info(&self) -> ModelInfo {
        self.model.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        tokio::time::sleep(self.delay).await;
        self.model.chat_stream(request).await
    }
}

/// Words enough to make a conversation worth compacting.
pub fn words(tag: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{tag}{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How many answers the writer gives before its hostile one.
pub const WRITER_ANSWERS: usize = 8;

/// The writer's own marks (not the defaults, so the page shows that it read the agent's policy):
/// its answers cross the trigger; it compacts only when asked.
pub const WRITER_MARKS: (f64, f64, f64) = (0.25, 0.35, 0.15);

/// A scripted team: `writer` answers long texts and then [`HOSTILE`] (under [`WRITER_MARKS`],
/// without automatic compaction); `coder` asks to run
/// `rm -rf build` and `rm -rf /data` at once (its policy asks about `rm `), then says `done`.
/// A compression agent with mechanical summaries serves both.
pub async fn team(runs: &Runs) -> (Team, Arc<ScriptedModel>) {
    team_buffering(runs, TeamConfig::default().event_capacity).await
}

/// [`team`], its bus buffering `events` per subscriber (a test that publishes in bulk sizes it
/// so the view is not made to miss what it is measured on).
pub async fn team_buffering(runs: &Runs, events: usize) -> (Team, Arc<ScriptedModel>) {
    let mut writer_script: Vec<ScriptedReply> = (0..WRITER_ANSWERS)
        .map(|i| ScriptedReply::text(words(&format!("w{i}x"), 300)))
        .collect();
    writer_script.push(ScriptedReply::text(HOSTILE));
    let writer = Arc::new(Slow {
        model: Arc::new(
            ScriptedModel::new("scripted-writer", writer_script).with_context_window(16_384),
        ),
        delay: Duration::from_millis(300),
    });
    let coder = Arc::new(ScriptedModel::new(
        "scripted-coder",
        [
            ScriptedReply::ToolCalls(vec![
                ("run".into(), r#"{"command": "rm -rf build"}"#.into()),
                ("run".into(), r#"{"command": "rm -rf /data"}"#.into()),
            ]),
            ScriptedReply::text("done"),
        ],
    ));
    let policy = ApprovalPolicy::new([ApprovalRule::argument_prefix(
        "run",
        "command",
        "rm ",
        Permission::Ask,
    )]);
    let config = TeamConfig {
        shutdown_grace: Duration::from_millis(500),
        event_capacity: events,
        ..TeamConfig::default()
    };
    let team =
        troupe_runtime::Team::builder()
            .config(config)
            // Mechanical summaries: the scripted models answer the agents only.
            .compression(CompressionConfig {
                model: CompressorModel::None,
                ..CompressionConfig::new(shared_counter())
            })
            .agent(AgentSpec::new("writer", writer).max_tokens(256).compaction(
                CompactionSettings {
                    policy: Some(ContextPolicy {
                        warning: WRITER_MARKS.0,
                        trigger: WRITER_MARKS.1,
                        target: WRITER_MARKS.2,
                        ..ContextPolicy::for_window(16_384)
                    }),
                    auto: false,
                    ..CompactionSettings::default()
                },
            ))
            .agent(
                AgentSpec::new("coder", coder.clone())
                    .tools(run_tool(runs))
                    .approval(policy),
            )
            .start()
            .await
            .unwrap();
    (team, coder)
}

/// An HTTP client (the process's TLS provider installed first, as troupe does).
pub fn client() -> reqwest::Client {
    troupe_host::tls::install_crypto_provider();
    reqwest::Client::new()
}

/// The token in a view's URL.
pub fn token_of(url: &str) -> String {
    url.split("token=").nth(1).unwrap().to_string()
}

/// The base of a view's URL (`http://127.0.0.1:PORT/`).
pub fn base_of(url: &str) -> String {
    url.split('?').next().unwrap().to_string()
}

/// Server-Sent Events read from a response: `(event, data)` pairs, as many as asked for.
pub async fn sse_events(response: reqwest::Response, n: usize) -> Vec<(String, String)> {
    sse_until(response, |seen| seen.len() >= n).await
}

/// Server-Sent Events read from a response until `enough` says so.
pub async fn sse_until(
    response: reqwest::Response,
    enough: impl Fn(&[(String, String)]) -> bool,
) -> Vec<(String, String)> {
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut out = Vec::new();
    while !enough(&out) {
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("an event within 30 s")
            .expect("the stream goes on")
            .unwrap();
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut event = String::from("message");
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            if !data.is_empty() {
                out.push((event, data));
                if enough(&out) {
                    return out;
                }
            }
        }
    }
    out
}

/// A session log of `asks` requests, each a user message, a tool call, its result and an
/// answer (four messages); the last answer is [`HOSTILE`], one in ten is long.
pub async fn session_log(path: &std::path::Path, asks: usize) {
    let script: Vec<ScriptedReply> = (0..asks)
        .flat_map(|i| {
            let answer = if i + 1 == asks {
                HOSTILE.to_string()
            } else if i % 10 == 0 {
                words(&format!("long{i}x"), 400)
            } else {
                format!("answer {i}")
            };
            [
                ScriptedReply::call("run", format!(r#"{{"command": "step {i}"}}"#)),
                ScriptedReply::text(answer),
            ]
        })
        .collect();
    let runs = Runs::default();
    let team = Team::builder()
        .agent(
            AgentSpec::new(
                "writer",
                Arc::new(
                    ScriptedModel::new("scripted-writer", script).with_context_window(1 << 20),
                ),
            )
            .tools(run_tool(&runs))
            .session(path),
        )
        .start()
        .await
        .unwrap();
    for i in 0..asks {
        team.ask("writer", format!("step {i}")).await.unwrap();
    }
    team.shutdown().await;
}
