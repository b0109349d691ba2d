//! One request, streamed to the terminal as it happens, and what the chat tells about it after
//! a Ctrl-C or a budget's pause.

use futures::StreamExt as _;
use troupe::protocol::{MessageId, Role};
use troupe::runtime::AskItem;
use troupe::{Event, LlmAgent};

use super::input::Lines;
use super::interrupts::Interrupts;
use super::shown::Shown;
use super::terminal::safe;
use super::{Chat, approval_prompt, budget_prompt};

impl Chat {
    /// One request, printed as it happens: the agent's text as the model generates it, its tool
    /// calls and compactions as one-line notices. Ctrl-C drops the stream, which cancels the
    /// request: the agent rolls its conversation back and its log loads as before it — unless the
    /// request was committed before the agent heard of it, which the chat then says.
    pub(super) async fn request(
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
