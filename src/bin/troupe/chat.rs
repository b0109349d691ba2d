//! `troupe chat`: a REPL with one agent and the compression agent, persisted to a session log.
//!
//! The session log is written here at every turn boundary from the agent's checkpoint: new
//! messages as `message` records, a changed history (a compaction, manual or automatic) as a
//! `compaction` record, plus the ledger. Ctrl-C during a turn abandons that turn: the team is
//! rebuilt from the log, which never saw it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt, BufReader};
use troupe::agents::{
    AgentSpec, CompactionSettings, CompressionConfig, LlmAgent, compact_agent, context_stats,
    shared_counter, spawn_compression_agent,
};
use troupe::config::{Config, build_model};
use troupe::runtime::session::{CompactionRecord, Session, SessionLog, SessionRecord};
use troupe::runtime::{Checkpoint, MessageKind, StoredMessage};
use troupe::{ChatMessage, ChatModel, Team, TeamConfig};

use crate::cli::ChatArgs;

/// Everything needed to (re)build the team.
struct Blueprint {
    spec: AgentSpec,
    compression_model: Arc<dyn ChatModel>,
}

/// The live chat: the team, and what of it the log already holds.
struct Chat {
    blueprint: Blueprint,
    team: Team,
    log: SessionLog,
    persisted: Vec<ChatMessage>,
    archive_persisted: usize,
    ledger_persisted: Option<serde_json::Value>,
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
        None => "assistant".to_string(),
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
        config.agent_spec(&agent_name, &models, default.clone())?
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
    let settings = CompactionSettings {
        policy: Some(config.compaction.policy(window)),
        auto: config.compaction.auto,
        ..CompactionSettings::default()
    };
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

/// Start a team with the agent restored from `checkpoint`.
async fn start_team(blueprint: &Blueprint, checkpoint: Option<Checkpoint>) -> anyhow::Result<Team> {
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
    let spec = blueprint.spec.clone();
    let initial = checkpoint;
    // The supervisor passes the last checkpoint on restarts; the first build uses the session's.
    let factory: troupe::runtime::BehaviorFactory = Arc::new(move |restart| {
        let checkpoint = restart.or_else(|| initial.clone());
        Ok(Box::new(LlmAgent::new(spec.clone(), checkpoint)?)
            as Box<dyn troupe::runtime::AgentBehavior>)
    });
    team.spawn(blueprint.spec.name.clone(), factory).await?;
    Ok(team)
}

fn checkpoint_of(session: &Session) -> Option<Checkpoint> {
    if session.conversation.is_empty() {
        return None;
    }
    let mut state = serde_json::Map::new();
    if let Some(ledger) = &session.ledger {
        state.insert("ledger".into(), ledger.clone());
    }
    state.insert(
        "archive".into(),
        serde_json::Value::Array(session.archive_entries.clone()),
    );
    Some(Checkpoint {
        conversation: session.conversation.clone(),
        state: serde_json::Value::Object(state),
    })
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
        let (log, session) = SessionLog::open_for(path, Some(&blueprint.spec.name))?;
        for w in &session.warnings {
            eprintln!("warning: {w}");
        }
        if !session.conversation.is_empty() {
            println!(
                "resumed {} ({} messages, {} compaction(s))",
                path.display(),
                session.conversation.len(),
                session.compactions
            );
        }
        let team = start_team(&blueprint, checkpoint_of(&session)).await?;
        Ok(Chat {
            blueprint,
            team,
            log,
            persisted: session.conversation.messages().to_vec(),
            archive_persisted: session.archive_entries.len(),
            ledger_persisted: session.ledger,
        })
    }

    fn name(&self) -> String {
        self.blueprint.spec.name.clone()
    }

    /// Write what the agent's checkpoint holds beyond the log, as one committed turn.
    fn persist(&mut self, report: Option<serde_json::Value>) -> anyhow::Result<()> {
        let Some(checkpoint) = self.team.checkpoint(&self.name()) else {
            return Ok(());
        };
        let now = checkpoint.conversation.messages();
        let extends =
            now.len() >= self.persisted.len() && now[..self.persisted.len()] == self.persisted[..];
        let archive: Vec<serde_json::Value> = checkpoint
            .state
            .get("archive")
            .and_then(|a| a.as_array())
            .cloned()
            .unwrap_or_default();
        let ledger = checkpoint.state.get("ledger").cloned();
        if extends {
            for m in &now[self.persisted.len()..] {
                self.log.append_message(m);
            }
        } else {
            let fresh: Vec<serde_json::Value> = archive
                .iter()
                .skip(self.archive_persisted)
                .cloned()
                .collect();
            let archived = fresh
                .iter()
                .filter_map(|e| {
                    serde_json::from_value::<StoredMessage>(e.get("original")?.clone()).ok()
                })
                .map(|m| m.id)
                .collect();
            let summary = now
                .iter()
                .rev()
                .find(|m| m.kind == MessageKind::Summary)
                .map(ChatMessage::text);
            self.log.append(SessionRecord::Compaction(CompactionRecord {
                messages: now.iter().map(StoredMessage::from).collect(),
                summary,
                archived,
                archive_entries: fresh,
                ledger: ledger.clone(),
                report: report.or_else(|| checkpoint.state.get("last_compaction").cloned()),
                ..CompactionRecord::default()
            }));
        }
        if ledger != self.ledger_persisted
            && let Some(l) = &ledger
        {
            self.log.append(SessionRecord::Ledger { ledger: l.clone() });
        }
        self.log.flush()?;
        self.persisted = now.to_vec();
        self.archive_persisted = archive.len().max(self.archive_persisted);
        self.ledger_persisted = ledger;
        Ok(())
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
                for (kind, tokens) in &s.by_kind {
                    println!("  {kind:<16} {tokens}");
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
                self.persist(serde_json::to_value(r).ok())?;
            }
            Err(e) => println!("{e}"),
        }
        Ok(())
    }

    /// Rebuild the team from the log (after Ctrl-C, `/clear` or `/resume`).
    async fn rebuild(&mut self, session: &Session) -> anyhow::Result<()> {
        let old = std::mem::replace(
            &mut self.team,
            start_team(&self.blueprint, checkpoint_of(session)).await?,
        );
        old.shutdown().await;
        self.persisted = session.conversation.messages().to_vec();
        self.archive_persisted = session.archive_entries.len();
        self.ledger_persisted = session.ledger.clone();
        Ok(())
    }

    async fn turn(&mut self, text: String) -> anyhow::Result<()> {
        let name = self.name();
        let ask = self.team.ask(&name, text);
        tokio::select! {
            answer = ask => {
                match answer {
                    Ok(answer) => println!("{answer}"),
                    Err(e) => println!("error: {e}"),
                }
                self.persist(None)?;
            }
            _ = tokio::signal::ctrl_c() => {
                println!("\n(turn cancelled)");
                let session = troupe::runtime::session::load(self.log.path())?;
                self.rebuild(&session).await?;
            }
        }
        Ok(())
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
            "/clear" => {
                chat.log.append(SessionRecord::Clear);
                chat.log.flush()?;
                let session = troupe::runtime::session::load(chat.log.path())?;
                chat.rebuild(&session).await?;
                println!("(conversation cleared)");
            }
            "/resume" => {
                let target = if rest.is_empty() {
                    chat.log.path().to_path_buf()
                } else {
                    PathBuf::from(rest)
                };
                let blueprint = Blueprint {
                    spec: chat.blueprint.spec.clone(),
                    compression_model: chat.blueprint.compression_model.clone(),
                };
                let next = Chat::open(blueprint, &target).await?;
                let old = std::mem::replace(&mut chat, next);
                old.team.shutdown().await;
            }
            other if other.starts_with('/') => println!("unknown command {other}"),
            _ => chat.turn(line.to_string()).await?,
        }
    }
    chat.team.shutdown().await;
    Ok(())
}
