//! A summarizer that needs no model: the `--model none` fallback.
//!
//! It reads the rendered messages back out of the prompt and fills the six sections from facts
//! it can extract mechanically: the user's requests (quoted, trimmed), sentences that state
//! constraints or decisions, the tools used with their counts, error lines, the last state of
//! the work. Weaker than a model at judging what matters, but it never invents anything, never
//! fails, and costs nothing. File lists are added by compaction from the ledger, as for any
//! summarizer.

use std::collections::BTreeMap;

use async_trait::async_trait;
use troupe_runtime::Role;

use super::format::{PROGRESS_SUBSECTIONS, SECTIONS};
use super::prompt::{
    CONVERSATION_CLOSE, CONVERSATION_OPEN, FOCUS_PREFIX, MESSAGE_CLOSE, MESSAGE_OPEN,
    PREVIOUS_CLOSE, PREVIOUS_OPEN, SummaryKind, SummaryPrompt,
};
use super::render::parse_header;
use super::summarizer::{Summarizer, SummarizerError};

/// Characters per token assumed when fitting the answer into `max_output_tokens`.
const CHARS_PER_TOKEN: usize = 4;
/// Words in user text that usually state a constraint or preference.
const CONSTRAINT_WORDS: [&str; 12] = [
    "must",
    "should",
    "don't",
    "do not",
    "never",
    "always",
    "prefer",
    "avoid",
    "make sure",
    "only",
    "without",
    "instead of",
];
/// Words in assistant text that usually state a decision.
const DECISION_WORDS: [&str; 10] = [
    "decided",
    "decide to",
    "instead",
    "because",
    "i'll use",
    "i will use",
    "going with",
    "chose",
    "root cause",
    "the fix is",
];
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

/// Builds structured summaries mechanically, without a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MechanicalSummarizer {
    window: usize,
}

impl MechanicalSummarizer {
    /// A mechanical summarizer; it reads any amount, so its window only bounds chunking.
    pub fn new() -> Self {
        MechanicalSummarizer { window: 1_000_000 }
    }

    /// One that pretends to have a `window`-token context (to exercise folding).
    pub fn with_window(window: usize) -> Self {
        MechanicalSummarizer { window }
    }
}

impl Default for MechanicalSummarizer {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Summarizer for MechanicalSummarizer {
    fn context_window(&self) -> usize {
        self.window
    }

    fn name(&self) -> &str {
        "mechanical"
    }

    async fn summarize(&self, prompt: SummaryPrompt) -> Result<String, SummarizerError> {
        let budget = prompt
            .max_output_tokens
            .saturating_mul(CHARS_PER_TOKEN)
            .max(40);
        match prompt.kind {
            SummaryKind::UserMessage | SummaryKind::AssistantMessage => {
                let text = between(&prompt.user, MESSAGE_OPEN, MESSAGE_CLOSE).unwrap_or("");
                let short = condense(text, budget);
                if short.is_empty() {
                    Err(SummarizerError::Empty)
                } else {
                    Ok(short)
                }
            }
            SummaryKind::Segment | SummaryKind::Update => {
                Ok(structured_summary(&prompt.user, budget))
            }
        }
    }
}

/// The text between the first `open` and the last `close` after it.
fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].rfind(close)? + start;
    Some(text[start..end].trim_matches('\n'))
}

/// One message read back from the rendered conversation.
#[derive(Debug, Default)]
struct Block {
    role: Option<Role>,
    tool: Option<String>,
    text: Vec<String>,
    calls: Vec<String>,
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

/// Whitespace collapsed and cut to `max_chars` characters (with an ellipsis).
fn condense(text: &str, max_chars: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= max_chars {
        return collapsed;
    }
    let cut: String = collapsed
        .chars()
        .take(max_chars.saturating_sub(1))
        .collect();
    format!("{}…", cut.trim_end())
}

fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split(['\n', '.', '?', '!'])
        .map(str::trim)
        .filter(|s| s.len() > 3)
}

fn contains_any(text: &str, words: &[&str]) -> bool {
    let lower = text.to_lowercase();
    words.iter().any(|w| lower.contains(w))
}

/// Everything extracted from one prompt, before it is fitted to the budget.
struct Facts {
    previous: BTreeMap<String, Vec<String>>,
    focus: Option<String>,
    user_requests: Vec<String>,
    constraints: Vec<String>,
    decisions: Vec<String>,
    errors: Vec<String>,
    tool_counts: BTreeMap<String, usize>,
    last_assistant: Option<String>,
    assistant_turns: usize,
}

fn gather(user: &str) -> Facts {
    let conversation_end = user.rfind(CONVERSATION_CLOSE).unwrap_or(0);
    let conversation = between(user, CONVERSATION_OPEN, CONVERSATION_CLOSE).unwrap_or("");
    let tail = &user[conversation_end..];
    let previous = between(tail, PREVIOUS_OPEN, PREVIOUS_CLOSE)
        .map(parse_sections)
        .unwrap_or_default();
    let focus = tail
        .lines()
        .find_map(|l| l.strip_prefix(FOCUS_PREFIX))
        .map(|f| f.trim().to_string());
    let mut facts = Facts {
        previous,
        focus,
        user_requests: Vec::new(),
        constraints: Vec::new(),
        decisions: Vec::new(),
        errors: Vec::new(),
        tool_counts: BTreeMap::new(),
        last_assistant: None,
        assistant_turns: 0,
    };
    for block in parse_blocks(conversation) {
        let text = block.text.join("\n");
        match block.role {
            Some(Role::User) if !text.trim().is_empty() => {
                facts.constraints.extend(
                    sentences(&text)
                        .filter(|s| contains_any(s, &CONSTRAINT_WORDS))
                        .map(str::to_string),
                );
                facts.user_requests.push(text);
            }
            Some(Role::Assistant) => {
                facts.assistant_turns += 1;
                for call in &block.calls {
                    *facts.tool_counts.entry(call.clone()).or_default() += 1;
                }
                if !text.trim().is_empty() {
                    facts.decisions.extend(
                        sentences(&text)
                            .filter(|s| contains_any(s, &DECISION_WORDS))
                            .map(str::to_string),
                    );
                    facts.last_assistant = Some(text);
                }
            }
            Some(Role::Tool) => {
                if let Some(line) = block.text.iter().find(|l| contains_any(l, &ERROR_WORDS)) {
                    let tool = block.tool.as_deref().unwrap_or("tool");
                    facts.errors.push(format!("{tool}: {}", line.trim()));
                }
            }
            _ => {}
        }
    }
    facts
}

/// How much of each list the answer can afford.
#[derive(Clone, Copy)]
struct Caps {
    items: usize,
    chars: usize,
}

fn structured_summary(user: &str, budget: usize) -> String {
    let facts = gather(user);
    let mut caps = Caps {
        items: 8,
        chars: 240,
    };
    loop {
        let text = render_facts(&facts, caps);
        if text.len() <= budget || (caps.items == 1 && caps.chars <= 40) {
            return text;
        }
        caps = Caps {
            items: (caps.items / 2).max(1),
            chars: (caps.chars * 2 / 3).max(40),
        };
    }
}

/// Previous items then new ones, without repeats, keeping the newest `caps.items`.
fn merged(previous: Option<&Vec<String>>, new: Vec<String>, caps: Caps) -> Vec<String> {
    let mut items: Vec<String> = previous.cloned().unwrap_or_default();
    for item in new {
        if !items.contains(&item) {
            items.push(item);
        }
    }
    let skip = items.len().saturating_sub(caps.items);
    items
        .into_iter()
        .skip(skip)
        .map(|i| condense(&i, caps.chars))
        .collect()
}

fn bullets(items: &[String]) -> String {
    if items.is_empty() {
        return "- (none)".to_string();
    }
    items
        .iter()
        .map(|i| {
            if i.starts_with(['-', '*']) || i.starts_with(char::is_numeric) {
                i.clone()
            } else {
                format!("- {i}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn quote(text: &str, chars: usize) -> String {
    format!("\"{}\"", condense(text, chars))
}

fn render_facts(facts: &Facts, caps: Caps) -> String {
    let previous = |key: &str| facts.previous.get(key);

    let mut goal: Vec<String> = previous("goal").cloned().unwrap_or_default();
    if goal.is_empty() {
        goal.extend(
            facts
                .user_requests
                .first()
                .map(|r| format!("User asked: {}", quote(r, caps.chars * 2))),
        );
    }
    if let Some(focus) = &facts.focus {
        goal.push(format!("Focus requested for this summary: {focus}"));
    }
    let goal = merged(
        None,
        goal,
        Caps {
            items: caps.items.max(2),
            chars: caps.chars * 2,
        },
    );

    let constraints = merged(
        previous("constraints & preferences"),
        facts
            .constraints
            .iter()
            .map(|c| quote(c, caps.chars))
            .collect(),
        caps,
    );

    let tools = facts
        .tool_counts
        .iter()
        .map(|(t, n)| format!("{t} ×{n}"))
        .collect::<Vec<_>>();
    let mut done_new = Vec::new();
    if facts.assistant_turns > 0 || !facts.user_requests.is_empty() {
        let tools = if tools.is_empty() {
            "no tools".to_string()
        } else {
            format!("tools used: {}", tools.join(", "))
        };
        done_new.push(format!(
            "[x] Worked through {} user message(s) and {} assistant turn(s); {tools}",
            facts.user_requests.len(),
            facts.assistant_turns
        ));
    }
    let done = merged(previous("progress/done"), done_new, caps);
    let in_progress = match &facts.last_assistant {
        Some(last) => vec![format!("[ ] Last state: {}", quote(last, caps.chars))],
        None => previous("progress/in progress")
            .cloned()
            .unwrap_or_default(),
    };
    let in_progress = merged(None, in_progress, caps);
    let blocked = merged(previous("progress/blocked"), facts.errors.clone(), caps);

    let decisions = merged(
        previous("key decisions"),
        facts
            .decisions
            .iter()
            .map(|d| quote(d, caps.chars))
            .collect(),
        caps,
    );
    let next = match facts.user_requests.last() {
        Some(last) => vec![format!(
            "1. Continue from the latest request: {}",
            quote(last, caps.chars)
        )],
        None => previous("next steps").cloned().unwrap_or_default(),
    };
    let next = merged(None, next, caps);

    let requests = facts
        .user_requests
        .iter()
        .map(|r| format!("User: {}", quote(r, caps.chars)))
        .collect();
    let context = merged(previous("critical context"), requests, caps);

    let [
        goal_h,
        constraints_h,
        progress_h,
        decisions_h,
        next_h,
        context_h,
    ] = SECTIONS;
    let [done_h, in_progress_h, blocked_h] = PROGRESS_SUBSECTIONS;
    format!(
        "## {goal_h}\n{}\n\n## {constraints_h}\n{}\n\n## {progress_h}\n### {done_h}\n{}\n### {in_progress_h}\n{}\n### {blocked_h}\n{}\n\n## {decisions_h}\n{}\n\n## {next_h}\n{}\n\n## {context_h}\n{}",
        bullets(&goal),
        bullets(&constraints),
        bullets(&done),
        bullets(&in_progress),
        bullets(&blocked),
        bullets(&decisions),
        bullets(&next),
        bullets(&context),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::summary::format::missing_sections;
    use crate::summary::prompt::{per_message_prompt, segment_prompt};

    const CONVERSATION: &str = "[m2 user]\nFix the parser. You must not change the public API.\n[m3 assistant]\nI'll read it.\n→ read {\"path\":\"src/parser.rs\"}\n[m4 tool read]\n[compressed] read src/parser.rs (300 lines)\n[m5 assistant]\nThe root cause is an off-by-one.\n→ bash {\"command\":\"cargo test\"}\n[m6 tool bash]\nerror[E0308]: mismatched types\n";

    fn run(prompt: SummaryPrompt) -> String {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(MechanicalSummarizer::new().summarize(prompt))
            .unwrap()
    }

    #[test]
    fn builds_all_sections_from_facts() {
        let text = run(segment_prompt(
            CONVERSATION,
            None,
            Some("parser errors"),
            800,
        ));
        assert!(missing_sections(&text).is_empty(), "{text}");
        assert!(text.contains("Fix the parser"));
        assert!(text.contains("must not change the public API"));
        assert!(text.contains("bash ×1, read ×1"));
        assert!(text.contains("error[E0308]: mismatched types"));
        assert!(text.contains("root cause is an off-by-one"));
        assert!(text.contains("parser errors"));
        assert!(text.len() <= 800 * CHARS_PER_TOKEN);
    }

    #[test]
    fn update_keeps_previous_goal_and_items() {
        let first = run(segment_prompt(CONVERSATION, None, None, 800));
        let later = "[m9 user]\nNow add a test.\n[m10 assistant]\nAdded.\n";
        let second = run(segment_prompt(later, Some(&first), None, 800));
        assert!(second.contains("Fix the parser"), "{second}");
        assert!(second.contains("Now add a test"));
        assert!(second.contains("must not change the public API"));
        assert!(missing_sections(&second).is_empty());
    }

    #[test]
    fn respects_a_tight_budget_and_per_message_bound() {
        let text = run(segment_prompt(CONVERSATION, None, None, 100));
        assert!(text.len() <= 100 * CHARS_PER_TOKEN + 200, "{}", text.len());
        assert!(missing_sections(&text).is_empty());
        let short = run(per_message_prompt(Role::User, &"word ".repeat(200), 50));
        assert!(short.chars().count() <= 50 * CHARS_PER_TOKEN);
    }
}
