//! `troupe chat` asks about a tool call the agent's approval policy pauses on: `y` runs it,
//! `n [reason]` denies it (the model sees the reason), `e` asks for edited arguments (a JSON
//! object; asked again until one is taken). The answer goes to the team's approval desk, not
//! to the agent, which waits inside its request.

use tokio::io::AsyncRead;
use troupe::Team;
use troupe::protocol::ApprovalId;
use troupe::runtime::approval::ApprovalError;

use super::input::{Line, Lines};
use super::interrupts::Interrupts;
use super::terminal::safe;

/// How asking ended.
pub(super) enum Asked {
    /// An answer was given (or the call no longer waited; that was said).
    Answered,
    /// Ctrl-C: the caller cancels the request (which withdraws the question).
    Interrupted,
}

/// What one question is about.
pub(super) struct Question<'a> {
    pub(super) id: &'a ApprovalId,
    pub(super) tool: &'a str,
    pub(super) arguments: &'a str,
}

/// Ask about `question` on the terminal and give the team the answer.
pub(super) async fn ask<R: AsyncRead + Unpin>(
    team: &Team,
    question: &Question<'_>,
    lines: &mut Lines<R>,
    interrupts: &mut Interrupts,
) -> Asked {
    println!(
        "approve tool `{}` with {}? [y]es / [n]o [reason] / [e]dit",
        safe(question.tool),
        safe(question.arguments)
    );
    loop {
        let Some(answer) = read(lines, interrupts, "approve? > ").await else {
            return Asked::Interrupted;
        };
        let (word, rest) = answer
            .split_once(' ')
            .map_or((answer.as_str(), ""), |(w, r)| (w, r.trim()));
        let decided = match word {
            "y" | "yes" => team.approve(question.id),
            "n" | "no" => {
                let reason = if rest.is_empty() {
                    "denied in the chat"
                } else {
                    rest
                };
                team.deny(question.id, reason)
            }
            "e" | "edit" => {
                let Some(arguments) = read(lines, interrupts, "arguments (JSON) > ").await else {
                    return Asked::Interrupted;
                };
                team.approve_with(question.id, arguments)
            }
            _ => {
                println!("answer y, n [reason] or e");
                continue;
            }
        };
        match decided {
            Ok(()) => return Asked::Answered,
            Err(e @ ApprovalError::InvalidArguments { .. }) => {
                println!("{}; try again", safe(&e.to_string()));
            }
            // Timed out or withdrawn meanwhile: the agent already told its model.
            Err(e) => {
                println!("({})", safe(&e.to_string()));
                return Asked::Answered;
            }
        }
    }
}

/// One line of answer; `None` on Ctrl-C. The end of the input (or an unreadable line) counts
/// as `n`: nobody is there to approve.
async fn read<R: AsyncRead + Unpin>(
    lines: &mut Lines<R>,
    interrupts: &mut Interrupts,
    prompt: &str,
) -> Option<String> {
    print!("{prompt}");
    crate::out::flush_stdout();
    tokio::select! {
        line = lines.next() => Some(match line {
            Ok(Some(Line::Text(text))) => text.trim().to_string(),
            Ok(Some(Line::NotUtf8)) => "n the answer was not valid UTF-8".to_string(),
            Ok(None) | Err(_) => "n the chat's input ended".to_string(),
        }),
        () = interrupts.next() => None,
    }
}
