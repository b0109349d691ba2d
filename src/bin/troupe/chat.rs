//! `troupe chat`: a REPL with one agent and the compression agent, persisted to a session log.
//!
//! The agent keeps its own session log ([`AgentSpec::session`]): every turn boundary — an answer,
//! a compaction — is one committed record group. A turn is streamed (`Team::ask_stream`): text
//! as the model generates it, tool calls and compactions as one-line notices; Ctrl-C drops the
//! stream, which cancels the turn — the agent rolls its conversation back and its log never sees
//! it. `/clear` is a job the agent handles (it records the fresh start in its own log), and so
//! is `/resume` (the agent moves to the other log and lets go of its own; a log it cannot take
//! changes nothing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use tokio::io::{AsyncBufReadExt, BufReader};
use troupe::agents::{
    AgentSpec, CompressionConfig, clear_conversation, compact_agent, context_stats, shared_counter,
    spawn_agent, spawn_compression_agent, switch_session,
};
use troupe::runtime::AskItem;
use troupe::runtime::session::{SessionError, SessionLock};
use troupe::telemetry::redact::redact_value;
use troupe::{ChatModel, Event, Team, TeamConfig};
use troupe_cli::config::{Config, build_model};

use crate::cli::ChatArgs;

/// Everything needed to (re)build the team.
#[derive(Clone)]
struct Blueprint {
    spec: AgentSpec,
    compression_model: Arc<dyn ChatModel>,
}

/// The live chat: the team and the session log its agent writes.
struct Chat {
    blueprint: Blueprint,
    team: Team,
    path: PathBuf,
}

async fn blueprint(args: &ChatArgs) -> anyhow::Result<Blueprint> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let agent_name = match &args.agent {
        Some(name) => name.clone(),
        None if config.agents.len() == 1 => {
            config.agents.keys().next().cloned().unwrap_or_default()
        }
        None if config.agents.is_empty() => "assistant".to_string(),
        // Picking one of several would chat with an agent the user did not choose.
        None => anyhow::bail!(
            "the configuration defines {} agents ({}); choose one with --agent NAME",
            config.agents.len(),
            config.agents.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    let mut models: BTreeMap<String, Arc<dyn ChatModel>> = BTreeMap::new();
    let mut wanted: Vec<String> = config
        .agents
        .get(&agent_name)
        .and_then(|a| config.agent_model_name(a))
        .into_iter()
        .collect();
    wanted.extend(config.compaction.model.clone());
    for name in wanted {
        if let Some(model_config) = config.models.get(&name) {
            let spinner = crate::progress::spinner(&format!("loading model `{name}`"));
            models.insert(name.clone(), build_model(&name, model_config).await?);
            spinner.finish_and_clear();
        }
    }
    let default = if models.is_empty() {
        let spinner = crate::progress::spinner("loading the default model");
        let model = troupe::agents::model::default_model()
            .await
            .context("loading the default model")?;
        spinner.finish_and_clear();
        Some(model)
    } else {
        None
    };
    let spec = if config.agents.contains_key(&agent_name) {
        config
            .agent_spec_connected(&agent_name, &models, default.clone())
            .await?
    } else if args.agent.is_some() {
        anyhow::bail!("no agent `{agent_name}` in the configuration");
    } else {
        let model = default
            .clone()
            .or_else(|| models.values().next().cloned())
            .context("no model")?;
        AgentSpec::new(agent_name, model).instructions("You are a helpful, concise assistant.")
    };
    let window = spec.model.info().context_window;
    let settings = config.compaction.settings(window);
    let compression_model = config
        .compaction
        .model
        .as_ref()
        .and_then(|name| models.get(name).cloned())
        .unwrap_or_else(|| spec.model.clone());
    Ok(Blueprint {
        spec: spec.compaction(settings),
        compression_model,
    })
}

/// Start a team whose agent keeps (and resumes from) the session log at `path`.
async fn start_team(blueprint: &Blueprint, path: &Path) -> anyhow::Result<Team> {
    let config = TeamConfig {
        shutdown_grace: Duration::from_secs(1),
        ..TeamConfig::default()
    };
    let team = Team::start(config).await?;
    let compression = CompressionConfig {
        model: Some(blueprint.compression_model.clone()),
        ..CompressionConfig::new(shared_counter())
    };
    spawn_compression_agent(&team, compression).await?;
    let spec = blueprint.spec.clone().session(path);
    if let Err(e) = spawn_agent(&team, spec).await {
        team.shutdown().await;
        return Err(e).with_context(|| format!("resuming the session {}", path.display()));
    }
    Ok(team)
}

fn default_session_path() -> anyhow::Result<PathBuf> {
    let dir = dirs::cache_dir()
        .context("no cache directory; pass --session")?
        .join("troupe")
        .join("sessions");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Ok(dir.join(format!("chat-{stamp}.jsonl")))
}

impl Chat {
    async fn open(blueprint: Blueprint, path: &Path) -> anyhow::Result<Chat> {
        // A session open elsewhere is refused up front, in plain words; the agent takes the lock
        // for itself below (any other problem with the log surfaces there, with its line).
        if let Err(e @ SessionError::InUse { .. }) = SessionLock::acquire(path) {
            anyhow::bail!("{e}: close that chat or choose another session");
        }
        // The agent reads (and, for a torn tail, repairs) the log; what it restored is in its
        // checkpoint, so the log is parsed once.
        let team = start_team(&blueprint, path).await?;
        let restored = team
            .checkpoint(&blueprint.spec.name)
            .map_or(0, |c| c.conversation.len());
        if restored > 0 {
            println!("resumed {} ({restored} messages)", path.display());
        }
        Ok(Chat {
            blueprint,
            team,
            path: path.to_path_buf(),
        })
    }

    fn name(&self) -> String {
        self.blueprint.spec.name.clone()
    }

    async fn status(&self) -> String {
        match context_stats(&self.team, &self.name()).await {
            Ok(stats) => format!("[ctx: {}%]", stats.percent),
            Err(_) => "[ctx: ?]".to_string(),
        }
    }

    async fn context(&self) {
        match context_stats(&self.team, &self.name()).await {
            Ok(s) => {
                println!("tokens {} of {} ({}%)", s.tokens, s.window, s.percent);
                for (title, shares) in [("by kind", &s.by_kind), ("by role", &s.by_role)] {
                    println!("  {title}:");
                    for share in shares {
                        println!(
                            "    {:<16} {:>7} tokens  {:>4} msg",
                            share.name, share.tokens, share.messages
                        );
                    }
                }
                match &s.last_compaction {
                    Some(r) => println!(
                        "last compaction: {} → {} tokens ({})",
                        r.tokens_before, r.tokens_after, r.reason
                    ),
                    None => println!("no compaction yet"),
                }
            }
            Err(e) => println!("cannot read the context: {e}"),
        }
    }

    async fn compact(&mut self, instructions: Option<String>) -> anyhow::Result<()> {
        match compact_agent(&self.team, &self.name(), instructions).await {
            Ok(outcome) => {
                let r = &outcome.report;
                println!(
                    "compacted: {} → {} tokens ({})",
                    r.tokens_before, r.tokens_after, r.reason
                );
            }
            Err(e) => println!("{}", redact_value(&e.to_string())),
        }
        Ok(())
    }

    /// One request, printed as it happens: the agent's text as the model generates it, its tool
    /// calls and compactions as one-line notices. Ctrl-C drops the stream, which cancels the
    /// turn: the agent rolls its conversation back and its log never sees the turn.
    async fn turn(&self, text: String) {
        let name = self.name();
        let mut stream = self.team.ask_stream(&name, text);
        let mut shown = Shown::default();
        let cancelled = loop {
            let item = tokio::select! {
                item = stream.next() => item,
                _ = tokio::signal::ctrl_c() => break true,
            };
            match item {
                None => break false,
                Some(Ok(AskItem::Event(event))) if event.agent() == name => shown.event(&event),
                Some(Ok(AskItem::Event(_))) => {}
                Some(Ok(AskItem::Answer(answer))) => shown.answer(&answer),
                // The agent's error can quote a provider's answer, key and all.
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    shown.end_line();
                    println!("error: {}", redact_value(&e.to_string()));
                }
            }
        };
        if cancelled {
            drop(stream);
            shown.end_line();
            println!("(turn cancelled)");
        }
    }
}

/// What a streamed turn has printed so far.
#[derive(Default)]
struct Shown {
    /// The text of the current model call, as printed.
    text: String,
    /// Whether the cursor is mid-line.
    mid_line: bool,
}

impl Shown {
    fn event(&mut self, event: &Event) {
        match event {
            Event::ModelCallStarted { .. } => self.text.clear(),
            Event::ModelDelta { text, .. } => {
                print!("{text}");
                crate::out::flush_stdout();
                self.text.push_str(text);
                self.mid_line = !text.ends_with('\n');
            }
            Event::ToolCallStarted { tool, .. } => self.notice(&format!("[tool {tool}]")),
            Event::ToolCallFinished {
                tool,
                is_error: true,
                ..
            } => self.notice(&format!("[tool {tool} reported an error]")),
            Event::CompactionStarted { tokens, .. } => {
                self.notice(&format!("[compacting {tokens} tokens…]"));
            }
            Event::CompactionFinished { report, .. } => self.notice(&format!(
                "[compacted: {} → {} tokens ({})]",
                report.tokens_before, report.tokens_after, report.reason
            )),
            _ => {}
        }
    }

    fn notice(&mut self, line: &str) {
        self.end_line();
        println!("{line}");
    }

    /// The answer is what the last model call streamed; print it only if it was not (a model
    /// that answered whole).
    fn answer(&mut self, answer: &str) {
        if self.text.trim() != answer.trim() {
            self.end_line();
            print!("{answer}");
            self.mid_line = true;
        }
        self.end_line();
    }

    fn end_line(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }
}

pub async fn run(args: ChatArgs) -> anyhow::Result<()> {
    let blueprint = blueprint(&args).await?;
    let path = match &args.session {
        Some(p) => p.clone(),
        None => default_session_path()?,
    };
    let mut chat = Chat::open(blueprint, &path).await?;
    println!(
        "chatting with `{}` ({}); session {}\n/compact [instructions] · /context · /clear · /resume [SESSION] · /exit",
        chat.name(),
        chat.blueprint.spec.model.info().name,
        path.display()
    );
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        print!("{} > ", chat.status().await);
        crate::out::flush_stdout();
        let line = tokio::select! {
            line = lines.next_line() => line?,
            _ = tokio::signal::ctrl_c() => {
                println!("\n(Ctrl-D or /exit quits)");
                continue;
            }
        };
        let Some(line) = line else { break };
        let line = line.trim();
        let (command, rest) = line
            .split_once(' ')
            .map_or((line, ""), |(c, r)| (c, r.trim()));
        match command {
            "" => {}
            "/exit" | "/quit" => break,
            "/context" => chat.context().await,
            "/compact" => {
                chat.compact(Some(rest.to_string()).filter(|r| !r.is_empty()))
                    .await?
            }
            "/clear" => match clear_conversation(&chat.team, &chat.name()).await {
                Ok(()) => println!("(conversation cleared)"),
                Err(e) => println!("cannot clear: {}", redact_value(&e.to_string())),
            },
            "/resume" => {
                let target = if rest.is_empty() {
                    chat.path.clone()
                } else {
                    PathBuf::from(rest)
                };
                // The agent switches logs itself: on any error it keeps its conversation and log.
                match switch_session(&chat.team, &chat.name(), &target).await {
                    Ok(restored) => {
                        println!("resumed {} ({restored} messages)", target.display());
                        chat.path = target;
                    }
                    Err(e) => println!(
                        "cannot resume {}: {}",
                        target.display(),
                        redact_value(&e.to_string())
                    ),
                }
            }
            other if other.starts_with('/') => println!("unknown command {other}"),
            _ => chat.turn(line.to_string()).await,
        }
    }
    chat.team.shutdown().await;
    Ok(())
}
