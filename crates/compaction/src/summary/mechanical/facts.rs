//! Reading the facts a mechanical summary is built from out of a rendered prompt.

use std::collections::BTreeMap;

use troupe_protocol::Role;

use super::prose::{
    is_correction, prose_sentences, states_constraint, states_decision, states_intent,
};
use crate::summary::prompt::{
    CONVERSATION_CLOSE, CONVERSATION_OPEN, FOCUS_PREFIX, PREVIOUS_CLOSE, PREVIOUS_OPEN,
};
use crate::summary::render::parse_header;

/// Words that mark an error line in tool output.
const ERROR_WORDS: [&str; 7] = [
    "error",
    "failed",
    "failure",
    "traceback",
    "exception",
    "panicked",
    "fatal",
];

/// Sentences of the last assistant prose kept as its "last state".
const LAST_STATE_SENTENCES: usize = 2;

/// Everything extracted from one prompt, before it is laid out and fitted to the budget.
#[derive(Debug, Default)]
pub(super) struct Facts {
    /// Sections of the summary being updated: heading (lowercase, `progress/…` for
    /// subsections) → item lines.
    pub previous: BTreeMap<String, Vec<String>>,
    /// The custom focus of this summary.
    pub focus: Option<String>,
    /// The prose of every user message with some, oldest first.
    pub user_requests: Vec<String>,
    /// User messages after the first that redirect the work.
    pub corrections: Vec<String>,
    /// User sentences stating a constraint or preference.
    pub constraints: Vec<String>,
    /// Assistant sentences stating a choice.
    pub decisions: Vec<String>,
    /// The last assistant sentence stating what it will do next.
    pub last_intent: Option<String>,
    /// The last sentences of the last assistant prose.
    pub last_state: Option<String>,
    /// First error line of each failing tool result, prefixed with the tool.
    pub errors: Vec<String>,
    /// Tool name → calls.
    pub tool_counts: BTreeMap<String, usize>,
    /// User messages seen.
    pub user_messages: usize,
    /// Assistant messages seen.
    pub assistant_turns: usize,
}

/// One message read back from the rendered conversation.
#[derive(Debug, Default)]
struct Block {
    role: Option<Role>,
    tool: Option<String>,
    text: Vec<String>,
    calls: Vec<String>,
}

/// The text between the first `open` and the last `close` after it.
pub(super) fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].rfind(close)? + start;
    Some(text[start..end].trim_matches('\n'))
}

/// The facts of a segment or update prompt's user text.
pub(super) fn gather(user: &str) -> Facts {
    let conversation_end = user.rfind(CONVERSATION_CLOSE).unwrap_or(0);
    let conversation = between(user, CONVERSATION_OPEN, CONVERSATION_CLOSE).unwrap_or("");
    let tail = &user[conversation_end..];
    let mut facts = Facts {
        previous: between(tail, PREVIOUS_OPEN, PREVIOUS_CLOSE)
            .map(parse_sections)
            .unwrap_or_default(),
        focus: tail
            .lines()
            .find_map(|l| l.strip_prefix(FOCUS_PREFIX))
            .map(|f| f.trim().to_string()),
        ..Facts::default()
    };
    for block in parse_blocks(conversation) {
        let text = block.text.join("\n");
        match block.role {
            Some(Role::User) => facts.add_user(&text),
            Some(Role::Assistant) => facts.add_assistant(&text, &block.calls),
            Some(Role::Tool) => {
                if let Some(line) = block.text.iter().find(|l| has_error_word(l)) {
                    let tool = block.tool.as_deref().unwrap_or("tool");
                    facts.errors.push(format!("{tool}: {}", line.trim()));
                }
            }
            _ => {}
        }
    }
    facts
}

impl Facts {
    fn add_user(&mut self, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        self.user_messages += 1;
        let sentences = prose_sentences(text);
        if sentences.is_empty() {
            return;
        }
        self.constraints
            .extend(sentences.iter().filter(|s| states_constraint(s)).cloned());
        let prose = sentences.join(" ");
        if !self.user_requests.is_empty() && is_correction(&prose) {
            self.corrections.push(prose.clone());
        }
        self.user_requests.push(prose);
    }

    fn add_assistant(&mut self, text: &str, calls: &[String]) {
        self.assistant_turns += 1;
        for call in calls {
            *self.tool_counts.entry(call.clone()).or_default() += 1;
        }
        let sentences = prose_sentences(text);
        if sentences.is_empty() {
            return;
        }
        self.decisions
            .extend(sentences.iter().filter(|s| states_decision(s)).cloned());
        if let Some(intent) = sentences.iter().rev().find(|s| states_intent(s)) {
            self.last_intent = Some(intent.clone());
        }
        let skip = sentences.len().saturating_sub(LAST_STATE_SENTENCES);
        self.last_state = Some(sentences[skip..].join(" "));
    }
}

fn has_error_word(line: &str) -> bool {
    let lower = line.to_lowercase();
    ERROR_WORDS.iter().any(|w| lower.contains(w))
}

fn parse_blocks(conversation: &str) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    for line in conversation.lines() {
        if let Some((_, role, tool)) = parse_header(line.trim_end()) {
            blocks.push(Block {
                role: Some(role),
                tool: tool.map(str::to_string),
                ..Block::default()
            });
            continue;
        }
        let Some(block) = blocks.last_mut() else {
            continue;
        };
        match line.strip_prefix("→ ") {
            Some(call) if block.role == Some(Role::Assistant) => {
                let name = call.split_whitespace().next().unwrap_or("tool");
                block.calls.push(name.to_string());
            }
            _ => block.text.push(line.to_string()),
        }
    }
    blocks
}

/// Sections of a previous summary: heading (lowercase) → item lines.
fn parse_sections(summary: &str) -> BTreeMap<String, Vec<String>> {
    let mut sections: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = String::new();
    for line in summary.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("### ") {
            current = format!("progress/{}", name.trim().to_ascii_lowercase());
        } else if let Some(name) = trimmed.strip_prefix("## ") {
            current = name.trim().trim_end_matches(':').to_ascii_lowercase();
        } else if !trimmed.is_empty() && !is_placeholder(trimmed) {
            sections
                .entry(current.clone())
                .or_default()
                .push(trimmed.to_string());
        }
    }
    sections
}

fn is_placeholder(item: &str) -> bool {
    let bare = item.trim_start_matches(['-', '*', ' ']).trim();
    bare.starts_with("(none") || bare.starts_with("(not provided")
}
