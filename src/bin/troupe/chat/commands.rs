//! The chat's slash commands on the agent: `/context`, `/compact`, `/resume` and `/clear`.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;
use troupe::agents::{CompactionAskError, LlmAgent};

use super::interrupts::Interrupts;
use super::terminal::safe;
use super::{Chat, resume};

impl Chat {
    pub(super) async fn context(&self) {
        match self
            .team
            .agent::<LlmAgent>(&self.name())
            .context_stats()
            .await
        {
            Ok(s) => {
                println!(
                    "tokens {} of {} usable ({}%): the window of {} less {} kept for the answer",
                    s.tokens,
                    s.window.saturating_sub(s.output_reserve),
                    s.percent,
                    s.window,
                    s.output_reserve
                );
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
                if let Some(sandbox) = &self.blueprint.sandbox {
                    println!(
                        "sandbox: {} (the commands the agent runs)",
                        sandbox.describe()
                    );
                }
            }
            Err(e) => println!("cannot read the context: {}", safe(&e.to_string())),
        }
    }

    /// `/compact`: Ctrl-C cancels it (the conversation stays as it was) unless it was already
    /// applied, and the chat says which.
    pub(super) async fn compact(&mut self, focus: Option<String>, interrupts: &mut Interrupts) {
        let cancel = CancellationToken::new();
        let name = self.name();
        let mut interrupted = false;
        let outcome = {
            let agent = self.team.agent::<LlmAgent>(&name);
            let run = agent.compact_cancellable(focus, cancel.clone());
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
            Err(CompactionAskError::Cancelled) => {
                println!("(compaction cancelled; the conversation is unchanged)");
            }
            Err(e) => println!("{}", safe(&e.to_string())),
        }
    }

    pub(super) async fn resume(&mut self, rest: &str) {
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
        super::protect_session(&target);
        // The agent switches logs itself: on any error it keeps its conversation and log.
        match self
            .team
            .agent::<LlmAgent>(&self.name())
            .switch_session(&target)
            .await
        {
            Ok(restored) => {
                println!("resumed {} ({restored} messages)", target.display());
                self.path = target;
                if !self.tell_paused().await {
                    self.resume_in_flight().await;
                }
                self.adopt_instructions().await;
            }
            Err(e) => println!(
                "cannot resume {}: {}",
                target.display(),
                safe(&e.to_string())
            ),
        }
    }

    pub(super) async fn clear(&mut self) {
        match self.team.agent::<LlmAgent>(&self.name()).clear().await {
            Ok(dropped) => {
                self.unsaved.forget();
                match dropped {
                    0 => println!("(conversation cleared)"),
                    1 => println!(
                        "(conversation cleared; the tool call that waited for approval was \
                         dropped with it, not run)"
                    ),
                    n => println!(
                        "(conversation cleared; the {n} tool calls that waited for approval \
                         were dropped with it, not run)"
                    ),
                }
            }
            Err(e) => println!("cannot clear: {}", safe(&e.to_string())),
        }
    }
}
