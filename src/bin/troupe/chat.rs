//! `troupe chat`: a REPL with one agent and the compression agent, persisted to a session log.
//!
//! The agent keeps its own session log ([`AgentSpec::session`]): every step of a request (each
//! model answer, each tool result) and every compaction is one committed record group, and a
//! request the last chat left in flight is resumed at start from its last step. Each line the
//! user types is one request, streamed (`Team::ask_stream`): text as the model generates it,
//! tool calls and compactions as one-line notices; Ctrl-C drops the stream, which cancels the
//! request — the agent rolls its conversation back and its log loads as before it (its
//! committed steps are closed as rolled back). `/clear` is a job the agent handles (it records
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
mod blueprint;
mod budget_prompt;
mod commands;
mod input;
mod interrupts;
mod request;
mod resume;
mod shown;
mod terminal;
mod unsaved;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use troupe::session::{SessionError, SessionLock};

use troupe::{LlmAgent, Team};

use crate::cli::ChatArgs;
use blueprint::{Blueprint, blueprint, default_session_path, start_team};
use input::{Line, Lines};
use interrupts::Interrupts;
use terminal::safe;
use unsaved::Unsaved;

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
        let mut chat = Chat {
            blueprint,
            team,
            path: path.to_path_buf(),
            requests: 0,
            unsaved: Unsaved::default(),
        };
        if !chat.tell_paused().await {
            chat.resume_in_flight().await;
        }
        chat.adopt_instructions().await;
        Ok(chat)
    }

    /// Say so when the log the agent continues from ends in a turn paused for approval; answers
    /// whether it does.
    async fn tell_paused(&self) -> bool {
        let paused = self
            .team
            .with_agent::<LlmAgent, _, _>(&self.name(), |a| {
                let calls = a.paused_calls();
                // Calls a step left open (durable steps) wait for no one: the resumed request
                // settles them.
                if calls.iter().any(|c| c.ask) {
                    calls.len()
                } else {
                    0
                }
            })
            .await
            .ok()
            .flatten()
            .unwrap_or(0);
        let told = paused > 0;
        if told {
            println!(
                "the last turn paused for approval ({paused} tool call(s)); your next message \
                 asks again before it goes on"
            );
        }
        told
    }

    /// A request the log shows in flight (the chat before this one stopped in the middle of
    /// it) is finished first, from its last committed step: no model answer in the log is asked
    /// for again, no finished tool runs again.
    async fn resume_in_flight(&mut self) {
        let in_flight = self
            .team
            .with_agent::<LlmAgent, _, _>(&self.name(), |a| a.request_in_flight())
            .await
            .ok()
            .flatten()
            .unwrap_or(false);
        if !in_flight {
            return;
        }
        println!("resuming the request in flight from its last committed step…");
        match self
            .team
            .agent::<LlmAgent>(&self.name())
            .resume_request()
            .await
        {
            Ok(Some(Ok(answer))) => {
                println!("{}", safe(&answer));
                self.check_saved(Some("the resumed request".to_string()))
                    .await;
            }
            Ok(Some(Err(e))) => println!(
                "error: the resumed request failed: {}",
                safe(&e.to_string())
            ),
            Ok(None) => {}
            Err(e) => println!("error: cannot resume the request: {}", safe(&e.to_string())),
        }
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
        match self
            .team
            .agent::<LlmAgent>(&self.name())
            .session_health()
            .await
        {
            Ok(behind) => self.unsaved.after(what, behind),
            Err(e) => println!(
                "warning: cannot tell whether the session log is written: {}",
                safe(&e.to_string())
            ),
        }
    }

    async fn status(&self) -> String {
        let context = match self
            .team
            .agent::<LlmAgent>(&self.name())
            .context_stats()
            .await
        {
            Ok(stats) => format!("ctx: {}%", stats.percent),
            Err(_) => "ctx: ?".to_string(),
        };
        match &self.blueprint.sandbox {
            Some(sandbox) => format!("[{context} · sandbox: {}]", sandbox.describe()),
            None => format!("[{context}]"),
        }
    }
}

/// Keep a session log and its lock note read-only for every sandboxed command.
fn protect_session(path: &Path) {
    troupe::tools::sandbox::protect(path);
    troupe::tools::sandbox::protect(troupe::session::lock_path(path));
}

pub async fn run(args: ChatArgs) -> anyhow::Result<()> {
    let blueprint = blueprint(&args).await?;
    let path = match &args.session {
        Some(p) => p.clone(),
        None => default_session_path()?,
    };
    // The session log and the configuration are troupe's: a command the model runs may find
    // them in its workspace, but never rewrites them (nor the sandbox the configuration chose).
    protect_session(&path);
    if let Some(config) = &args.config {
        troupe::tools::sandbox::protect(config);
    }
    let serve = blueprint.serve.clone();
    let mut chat = Chat::open(blueprint, &path).await?;
    let view = crate::ui_cmd::live(&chat.team, args.ui, &serve).await?;
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
    if let Some(view) = view {
        view.shutdown().await;
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
