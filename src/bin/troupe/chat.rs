//! `troupe chat`: a REPL with one agent and the compression agent, persisted to a session log.
//!
//! The agent keeps its own session log ([`AgentSpec::session`]): every answer and every
//! compaction is one committed record group. Each line the user types is one request, streamed
//! (`Team::ask_stream`): text as the model generates it, tool calls and compactions as one-line
//! notices; Ctrl-C drops the stream, which cancels the request — the agent rolls its
//! conversation back and its log never sees it. `/clear` is a job the agent handles (it records
//! the fresh start in its own log), and so is `/resume` (the agent moves to the other log and
//! lets go of its own; a log it cannot take changes nothing).
//!
//! What the chat tells the user is the truth about the log and the conversation: a request or a
//! compaction whose write failed is named at once and at exit (the exit status is then
//! nonzero); a Ctrl-C that came after the request was committed says so, one during `/compact`
//! cancels it; a log written by another agent is refused; a resumed log whose system prompt
//! differs from the configuration's instructions follows the configuration, with a note.
//! Everything from a model or a tool is redacted and escaped before it reaches the terminal
//! ([`terminal`]), and a line of input that is not UTF-8 is skipped with a warning.

mod approval_prompt;
mod budget_prompt;
mod input;
mod interrupts;
mod resume;
mod shown;
mod terminal;
mod unsaved;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use troupe::agents::compression::CompressionConfig;
use troupe::agents::session::{SessionError, SessionLock};
use troupe::agents::{
    AgentSpec, CancellationToken, CompactError, clear_conversation, compact_agent_cancellable,
    context_stats, session_health, spawn_agent, spawn_compression_agent, switch_session,
};
use troupe::runtime::{AskItem, MessageId, Role};
use troupe::{ChatModel, Event, LlmAgent, Team, TeamConfig};
use troupe_cli::config::{Config, build_model};

use crate::cli::ChatArgs;
use input::{Line, Lines};
use interrupts::Interrupts;
use shown::Shown;
use terminal::safe;
use unsaved::Unsaved;

/// Everything needed to (re)build the team.
#[derive(Clone)]
struct Blueprint {
    spec: AgentSpec,
    compression: CompressionConfig,
}

/// The live chat: the team and the session log its agent writes.
struct Chat {
    blueprint: Blueprint,
    team: Team,
    path: PathBuf,
    /// Requests sent in this run (each is named by its number).
    requests: usize,
    /// What the session log is missing.
    unsaved: Unsaved,
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
    // The compaction model the rule chooses is built with the agent's (the only ones loaded).
    wanted.extend(config.compaction_model()?.model_name().map(str::to_string));
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
    let compression = config.compression_config(&models, default.as_ref())?;
    Ok(Blueprint {
        spec: spec.compaction(settings),
        compression,
    })
}

/// Start a team whose agent keeps (and resumes from) the session log at `path`.
async fn start_team(blueprint: &Blueprint, path: &Path) -> anyhow::Result<Team> {
    let config = TeamConfig {
        shutdown_grace: Duration::from_secs(1),
        ..TeamConfig::default()
    };
    let team = Team::start(config).await?;
    spawn_compression_agent(&team, blueprint.compression.clone()).await?;
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
        resume::check_agent(path, &blueprint.spec.name)?;
        // The agent reads (and, for a torn tail, repairs) the log; what it restored is in its
        // checkpoint, so the log is parsed once.
        let team = start_team(&blueprint, path).await?;
        let restored = team
            .checkpoint(&blueprint.spec.name)
            .map_or(0, |c| c.conversation.len());
        if restored > 0 {
            println!("resumed {} ({restored} messages)", path.display());
        }
        let paused = team
            .with_agent::<LlmAgent, _, _>(&blueprint.spec.name, |a| a.paused_calls().len())
            .await
            .ok()
            .flatten()
            .unwrap_or(0);
        if paused > 0 {
            println!(
                "the last turn paused for approval ({paused} tool call(s)); your next message \
                 asks again before it goes on"
            );
        }
        let mut chat = Chat {
            blueprint,
            team,
            path: path.to_path_buf(),
            requests: 0,
            unsaved: Unsaved::default(),
        };
        chat.adopt_instructions().await;
        Ok(chat)
    }

    fn name(&self) -> String {
        self.blueprint.spec.name.clone()
    }

    /// A resumed conversation follows the configuration's instructions, not the ones the log
    /// was written with (the configuration is what the user edits); say so when they differ.
    async fn adopt_instructions(&mut self) {
        let adopted = self
            .team
            .with_agent::<LlmAgent, _, _>(&self.name(), LlmAgent::adopt_spec_instructions)
            .await;
        if let Ok(Some(true)) = adopted {
            println!(
                "note: the session was written with other instructions than the configuration's; \
                 the conversation now follows the configuration's"
            );
            self.check_saved(Some("the new instructions".to_string()))
                .await;
        }
    }

    /// After a commit to the log (`what` it added; `None`: nothing, a failed request): ask the
    /// agent whether its log holds everything, and tell.
    async fn check_saved(&mut self, what: Option<String>) {
        match session_health(&self.team, &self.name()).await {
            Ok(behind) => self.unsaved.after(what, behind),
            Err(e) => println!(
                "warning: cannot tell whether the session log is written: {}",
                safe(&e.to_string())
            ),
        }
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
                        r.tokens_before,
                        r.tokens_after,
                        safe(&r.reason)
                    ),
                    None => println!("no compaction yet"),
                }
                if let Some(job) = &s.in_flight {
                    println!(
                        "compacting in the background: {} messages, {} tokens, for {:.1} s",
                        job.messages,
                        job.tokens,
                        job.age_ms as f64 / 1000.0
                    );
                }
                let spend = &s.spend;
                println!("spent: request {}; agent {}", spend.request, spend.agent);
                if let Some(team) = &spend.team {
                    println!("  team {team}");
                }
            }
            Err(e) => println!("cannot read the context: {}", safe(&e.to_string())),
        }
    }

    /// `/compact`: Ctrl-C cancels it (the conversation stays as it was) unless it was already
    /// applied, and the chat says which.
    async fn compact(&mut self, focus: Option<String>, interrupts: &mut Interrupts) {
        let cancel = CancellationToken::new();
        let name = self.name();
        let mut interrupted = false;
        let outcome = {
            let run = compact_agent_cancellable(&self.team, &name, focus, cancel.clone());
            tokio::pin!(run);
            tokio::select! {
                biased;
                outcome = &mut run => outcome,
                () = interrupts.next() => {
                    interrupted = true;
                    cancel.cancel();
                    run.await
                }
            }
        };
        match outcome {
            Ok(outcome) => {
                let r = &outcome.report;
                println!(
                    "compacted: {} → {} tokens ({})",
                    r.tokens_before,
                    r.tokens_after,
                    safe(&r.reason)
                );
                if interrupted {
                    println!("(Ctrl-C came after the compaction was applied: it is kept)");
                }
                let changed = !(r.skipped || r.no_compaction_needed);
                let what = format!("the compaction after request {}", self.requests);
                self.check_saved(changed.then_some(what)).await;
            }
            Err(CompactError::Cancelled) => {
                println!("(compaction cancelled; the conversation is unchanged)");
            }
            Err(e) => println!("{}", safe(&e.to_string())),
        }
    }

    /// One request, printed as it happens: the agent's text as the model generates it, its tool
    /// calls and compactions as one-line notices. Ctrl-C drops the stream, which cancels the
    /// request: the agent rolls its conversation back and its log never sees it — unless the
    /// request was committed before the agent heard of it, which the chat then says.
    async fn request(
        &mut self,
        text: String,
        interrupts: &mut Interrupts,
        lines: &mut Lines<tokio::io::Stdin>,
    ) {
        let name = self.name();
        self.requests += 1;
        let what = format!(
            "request {} (\u{201c}{}\u{201d})",
            self.requests,
            excerpt(&text)
        );
        // Where the conversation stands: a message from here on is this request's.
        let before = self.next_message_id().await;
        let mut stream = self.team.ask_stream(&name, text);
        let mut shown = Shown::default();
        let mut answered = false;
        // Ended at the user's word while its budget paused it: nothing to roll back or report.
        let mut ended = false;
        let interrupted = loop {
            // What the stream already holds comes first: an answer that arrived wins over a
            // Ctrl-C that came at the same time. (Not a guarantee — the runtime may make a
            // ready stream wait its turn — so after a Ctrl-C the agent itself is asked.)
            let item = tokio::select! {
                biased;
                item = stream.next() => item,
                () = interrupts.next() => break true,
            };
            match item {
                None => break false,
                Some(Ok(AskItem::Event(Event::ApprovalRequested {
                    id,
                    agent,
                    tool,
                    arguments,
                }))) if agent == name => {
                    shown.flush_text();
                    shown.end_line();
                    let question = approval_prompt::Question {
                        id: &id,
                        tool: &tool,
                        arguments: &arguments,
                    };
                    match approval_prompt::ask(&self.team, &question, lines, interrupts).await {
                        approval_prompt::Asked::Answered => {}
                        approval_prompt::Asked::Interrupted => break true,
                    }
                }
                Some(Ok(AskItem::Event(event @ Event::BudgetPaused { .. })))
                    if event.agent() == name =>
                {
                    shown.event(&event);
                    let Event::BudgetPaused { exceeded, .. } = &event else {
                        continue;
                    };
                    let budget = &self.blueprint.spec.budget;
                    match budget_prompt::ask(budget, exceeded, lines, interrupts).await {
                        budget_prompt::Asked::Raised => {}
                        // Dropping the stream ends the paused request typed, keeping it all.
                        budget_prompt::Asked::End => {
                            ended = true;
                            break true;
                        }
                        budget_prompt::Asked::Interrupted => break true,
                    }
                }
                Some(Ok(AskItem::Event(event))) if event.agent() == name => shown.event(&event),
                Some(Ok(AskItem::Event(_))) => {}
                Some(Ok(AskItem::Answer(answer))) => {
                    answered = true;
                    shown.answer(&answer);
                }
                Some(Ok(_)) => {}
                // The agent's error can quote a provider's answer, key and all.
                Some(Err(e)) => {
                    shown.flush_text();
                    shown.end_line();
                    println!("error: {}", safe(&e.to_string()));
                }
            }
        };
        if ended {
            drop(stream);
            println!("(request ended: its budget is spent; what it did is kept)");
        } else if interrupted {
            drop(stream);
            shown.flush_text();
            shown.end_line();
            match self.committed_answer(before).await {
                Some(answer) => {
                    answered = true;
                    shown.answer(&answer);
                    println!("(Ctrl-C came after the request was completed: it is kept)");
                }
                None => println!("(request cancelled)"),
            }
        }
        self.check_saved(answered.then_some(what)).await;
    }

    /// The id the agent's next message will get.
    async fn next_message_id(&self) -> Option<MessageId> {
        self.team
            .with_agent::<LlmAgent, _, _>(&self.name(), |agent| agent.conversation().next_id())
            .await
            .ok()
            .flatten()
    }

    /// After a Ctrl-C: the answer of the request, when the agent had committed it (its
    /// conversation holds messages from `before` on) rather than rolled it back. Asked between
    /// the agent's requests, so once it has finished with the one abandoned.
    async fn committed_answer(&self, before: Option<MessageId>) -> Option<String> {
        let before = before?;
        self.team
            .with_agent::<LlmAgent, _, _>(&self.name(), move |agent| {
                let messages = agent.conversation().messages();
                messages.iter().any(|m| m.id >= before).then(|| {
                    messages
                        .iter()
                        .rev()
                        .find(|m| m.role == Role::Assistant)
                        .map(|m| m.text())
                        .unwrap_or_default()
                })
            })
            .await
            .ok()
            .flatten()
            .flatten()
    }

    async fn resume(&mut self, rest: &str) {
        let target = if rest.is_empty() {
            self.path.clone()
        } else {
            PathBuf::from(rest)
        };
        if self.unsaved.any() {
            // The agent would leave the log it could not write, and what it missed with it.
            println!(
                "cannot resume {}: the current session log is missing requests (see above); \
                 /exit shows what, or send one more request once the log can be written",
                target.display()
            );
            return;
        }
        if let Err(e) = resume::check_agent(&target, &self.name()) {
            println!("cannot resume: {}", safe(&e.to_string()));
            return;
        }
        // The agent switches logs itself: on any error it keeps its conversation and log.
        match switch_session(&self.team, &self.name(), &target).await {
            Ok(restored) => {
                println!("resumed {} ({restored} messages)", target.display());
                self.path = target;
                self.adopt_instructions().await;
            }
            Err(e) => println!(
                "cannot resume {}: {}",
                target.display(),
                safe(&e.to_string())
            ),
        }
    }

    async fn clear(&mut self) {
        match clear_conversation(&self.team, &self.name()).await {
            Ok(()) => {
                self.unsaved.forget();
                println!("(conversation cleared)");
            }
            Err(e) => println!("cannot clear: {}", safe(&e.to_string())),
        }
    }
}

/// The start of a user's line, to name its request by.
fn excerpt(text: &str) -> String {
    const SHOWN: usize = 30;
    let mut short: String = text.chars().take(SHOWN).collect();
    if text.chars().nth(SHOWN).is_some() {
        short.push('…');
    }
    safe(&short)
}

pub async fn run(args: ChatArgs) -> anyhow::Result<()> {
    let blueprint = blueprint(&args).await?;
    let path = match &args.session {
        Some(p) => p.clone(),
        None => default_session_path()?,
    };
    let mut chat = Chat::open(blueprint, &path).await?;
    println!(
        "chatting with `{}` ({}); session {}\n/compact [focus] · /context · /clear · /resume [SESSION] · /exit",
        chat.name(),
        safe(&chat.blueprint.spec.model.info().name),
        path.display()
    );
    let mut interrupts = Interrupts::new();
    let mut lines = Lines::new(tokio::io::stdin());
    let mut input_error = None;
    loop {
        print!("{} > ", chat.status().await);
        crate::out::flush_stdout();
        let line = tokio::select! {
            line = lines.next() => match line {
                Ok(line) => line,
                // The input is gone: end as at its end, saying why and what the log misses.
                Err(e) => {
                    input_error = Some(e);
                    None
                }
            },
            () = interrupts.next() => {
                println!("\n(Ctrl-D or /exit quits)");
                continue;
            }
        };
        let line = match line {
            None => break,
            Some(Line::Text(line)) => line,
            Some(Line::NotUtf8) => {
                println!("warning: that line is not valid UTF-8; it was ignored");
                continue;
            }
        };
        let line = line.trim();
        let (command, rest) = line
            .split_once(' ')
            .map_or((line, ""), |(c, r)| (c, r.trim()));
        match command {
            "" => {}
            "/exit" | "/quit" => break,
            "/context" => chat.context().await,
            "/compact" => {
                let focus = Some(rest.to_string()).filter(|r| !r.is_empty());
                chat.compact(focus, &mut interrupts).await;
            }
            "/clear" => chat.clear().await,
            "/resume" => chat.resume(rest).await,
            other if other.starts_with('/') => println!("unknown command {}", safe(other)),
            _ => {
                chat.request(line.to_string(), &mut interrupts, &mut lines)
                    .await;
            }
        }
    }
    chat.team.shutdown().await;
    // Not saving what the user was told is kept is a failure of the chat, whatever came after.
    match (chat.unsaved.summary(), input_error) {
        (Some(summary), None) => Err(anyhow::anyhow!(summary)),
        (Some(summary), Some(e)) => Err(anyhow::anyhow!("reading the input: {e}; {summary}")),
        (None, Some(e)) => Err(e).context("reading the input"),
        (None, None) => Ok(()),
    }
}
