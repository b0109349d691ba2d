//! A log's steps: its commits, each named by what it recorded (`troupe session show`).
//!
//! A step is one commit; its id is the commit's place in the log (the header's is 0), so a
//! step id stays valid for as long as the log lives (the log is append-only) and means the same
//! in a fork that keeps it. A log that commits per step (format 2) shows a request as a
//! `request` step, then its `model call`s and `tool call`s; a log of request-level commits
//! (format 1, or an agent with `AgentSpec::request_commits_only`) shows each request
//! whole.

use std::path::Path;

use troupe_protocol::{ChatMessage, Role};

use super::error::SessionError;
use super::files::read_regular;
use super::records::{RequestOutcome, SessionRecord};
use super::scan::{Scan, scan_commits};

/// What a step recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepKind {
    /// The log's header.
    Start,
    /// A request began (with durable steps), or a whole request (request-level commits).
    Request,
    /// A model's answer.
    ModelCall,
    /// A tool call's result.
    ToolCall,
    /// Tool calls began to run.
    ToolsStarted,
    /// A tool batch's results became messages.
    ToolResults,
    /// A turn paused for approval.
    Paused,
    /// A compaction (or a closed scope): the conversation was rewritten.
    Compaction,
    /// A request ended.
    RequestEnd,
    /// A failed request's conversation went back to where the request found it.
    RolledBack,
    /// The request in flight resumed after its agent failed and was rebuilt.
    Resumed,
    /// `/clear`.
    Clear,
    /// Anything else: a model change, a file ledger, a changed system prompt.
    Other,
}

impl StepKind {
    /// The kind in words, as `troupe session show` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Start => "start",
            StepKind::Request => "request",
            StepKind::ModelCall => "model call",
            StepKind::ToolCall => "tool call",
            StepKind::ToolsStarted => "tools started",
            StepKind::ToolResults => "tool results",
            StepKind::Paused => "paused",
            StepKind::Compaction => "compaction",
            StepKind::RequestEnd => "request end",
            StepKind::RolledBack => "rolled back",
            StepKind::Resumed => "resumed",
            StepKind::Clear => "clear",
            StepKind::Other => "other",
        }
    }
}

/// One step of a log: one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Its id: the commit's place in the log, the header's being 0.
    pub id: usize,
    /// What it recorded.
    pub kind: StepKind,
    /// The 1-based line of its first record.
    pub line: usize,
    /// A one-line description (a request's text, a call's tool, an answer's usage), cut short.
    pub detail: String,
    /// Where the commit ends in the file (a fork at this step keeps the bytes before it).
    pub(super) end: u64,
}

/// The committed steps of the log at `path`, oldest first (read-only; takes no lock).
///
/// # Errors
/// As [`super::load`]: the log must load to be listed.
pub fn steps(path: &Path) -> Result<Vec<Step>, SessionError> {
    let bytes = read_regular(path)?;
    Ok(steps_of(path, &bytes)?.0)
}

/// The steps of `bytes` (the log at `path`) and the scan they came from.
pub(super) fn steps_of(path: &Path, bytes: &[u8]) -> Result<(Vec<Step>, Scan), SessionError> {
    let mut steps = Vec::new();
    let scan = scan_commits(path, bytes, &mut |records, end| {
        let (kind, detail) = describe(records.iter().map(|(r, _)| r));
        steps.push(Step {
            id: steps.len(),
            kind,
            line: records.first().map_or(0, |(_, line)| *line),
            detail,
            end,
        });
    })?;
    Ok((steps, scan))
}

/// The longest detail shown, in characters.
const DETAIL: usize = 60;

fn excerpt(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut short: String = one_line.chars().take(DETAIL).collect();
    if one_line.chars().nth(DETAIL).is_some() {
        short.push('…');
    }
    short
}

/// What a commit's records were, most telling first.
fn describe<'a>(records: impl Iterator<Item = &'a SessionRecord> + Clone) -> (StepKind, String) {
    let has = |f: fn(&SessionRecord) -> bool| records.clone().any(f);
    let messages = || {
        records.clone().filter_map(|r| match r {
            SessionRecord::Message(m) => Some(ChatMessage::from(m.clone())),
            _ => None,
        })
    };
    let last_of = |role: Role| messages().filter(|m| m.role == role).last();
    if has(|r| matches!(r, SessionRecord::Session { .. })) {
        return (StepKind::Start, String::new());
    }
    if has(|r| {
        matches!(
            r,
            SessionRecord::RequestClosed {
                outcome: RequestOutcome::RolledBack
            }
        )
    }) {
        return (StepKind::RolledBack, String::new());
    }
    if has(|r| matches!(r, SessionRecord::RequestResuming)) {
        return (StepKind::Resumed, "after the agent failed".to_string());
    }
    let user = last_of(Role::User).map(|m| excerpt(&m.text()));
    let compacted = has(|r| matches!(r, SessionRecord::Compaction(_)));
    if has(|r| matches!(r, SessionRecord::RequestOpened { .. })) {
        let mut detail = user.unwrap_or_default();
        if compacted {
            detail.push_str(" (after a compaction)");
        }
        return (StepKind::Request, detail);
    }
    for record in records.clone() {
        if let SessionRecord::Compaction(c) = record {
            return (
                StepKind::Compaction,
                format!("{} messages after it", c.messages.len()),
            );
        }
    }
    if has(|r| matches!(r, SessionRecord::Clear)) {
        return (StepKind::Clear, String::new());
    }
    for record in records.clone() {
        if let SessionRecord::ModelAnswer { usage } = record {
            let answer = last_of(Role::Assistant);
            let what = match &answer {
                Some(m) if !m.calls().is_empty() => {
                    let names: Vec<&str> =
                        m.calls().iter().map(|c| c.function.name.as_str()).collect();
                    format!("calls {}", names.join(", "))
                }
                Some(m) => format!("answer: {}", excerpt(&m.text())),
                None => String::new(),
            };
            return (
                StepKind::ModelCall,
                format!(
                    "{what} ({} in, {} out tokens)",
                    usage.input_tokens, usage.output_tokens
                ),
            );
        }
    }
    // Calls starting, with the refused ones of their batch answered in the same commit.
    if user.is_none() {
        for record in records.clone() {
            if let SessionRecord::CallsStarted { call_ids } = record {
                return (StepKind::ToolsStarted, call_ids.join(", "));
            }
        }
    }
    for record in records.clone() {
        if let SessionRecord::CallResult { call_id, content } = record {
            return (
                StepKind::ToolCall,
                format!("{call_id}: {}", excerpt(content)),
            );
        }
    }
    if let Some(user) = user {
        return (StepKind::Request, user);
    }
    if has(|r| matches!(r, SessionRecord::Paused { .. })) {
        return (StepKind::Paused, String::new());
    }
    if messages().any(|m| m.role == Role::Tool) {
        return (StepKind::ToolResults, String::new());
    }
    if has(|r| matches!(r, SessionRecord::RequestClosed { .. })) {
        let answer = last_of(Role::Assistant).map(|m| excerpt(&m.text()));
        return (StepKind::RequestEnd, answer.unwrap_or_default());
    }
    (StepKind::Other, String::new())
}
