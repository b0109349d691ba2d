//! Summary prompts, built from the templates in `prompts/`.

use serde::{Deserialize, Serialize};
use troupe_protocol::Role;

use troupe_tokens::TokenCounter;

const SEGMENT_SYSTEM: &str = include_str!("../../prompts/segment_system.md");
const UPDATE_SYSTEM: &str = include_str!("../../prompts/update_system.md");
pub(super) const SUMMARY_FORMAT: &str = include_str!("../../prompts/summary_format.md");
const PER_MESSAGE_USER: &str = include_str!("../../prompts/per_message_user.md");
const PER_MESSAGE_ASSISTANT: &str = include_str!("../../prompts/per_message_assistant.md");

/// Opening tag of the messages to summarize in a prompt's user text.
pub(crate) const CONVERSATION_OPEN: &str = "<conversation>";
/// Closing tag of the messages to summarize.
pub(crate) const CONVERSATION_CLOSE: &str = "</conversation>";
/// Opening tag of the summary being updated.
pub(crate) const PREVIOUS_OPEN: &str = "<previous-summary>";
/// Closing tag of the summary being updated.
pub(crate) const PREVIOUS_CLOSE: &str = "</previous-summary>";
/// Opening tag of the single message of a per-message prompt.
pub(crate) const MESSAGE_OPEN: &str = "<message>";
/// Closing tag of the single message of a per-message prompt.
pub(crate) const MESSAGE_CLOSE: &str = "</message>";
/// Prefix of the line carrying the compaction's focus.
pub(crate) const FOCUS_PREFIX: &str = "Additional focus: ";

/// What a summary prompt asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryKind {
    /// A first structured summary of a segment.
    Segment,
    /// A structured summary that merges a previous one with newer messages.
    Update,
    /// A shortened user message (per-message mode).
    UserMessage,
    /// A shortened assistant message (per-message mode).
    AssistantMessage,
}

/// One request to a [`super::Summarizer`]: a system and a user message, and an output bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryPrompt {
    /// The instructions.
    pub system: String,
    /// The material: messages in `<conversation>`, the previous summary, the focus.
    pub user: String,
    /// The most tokens the answer may take; the request reserves them in the window.
    pub max_output_tokens: usize,
    /// What is asked for.
    pub kind: SummaryKind,
}

impl SummaryPrompt {
    /// The window this request needs: both messages with framing, plus the reserved output.
    pub fn request_tokens(&self, counter: &dyn TokenCounter) -> usize {
        let overhead = counter.overhead();
        2 * overhead.per_message
            + counter.count(Role::System.as_str())
            + counter.count(Role::User.as_str())
            + counter.count(&self.system)
            + counter.count(&self.user)
            + overhead.reply_priming
            + self.max_output_tokens
    }
}

/// The prompt that summarizes `conversation` (rendered messages), merging `previous` if given.
pub fn segment_prompt(
    conversation: &str,
    previous: Option<&str>,
    focus: Option<&str>,
    max_output_tokens: usize,
) -> SummaryPrompt {
    let (intro, kind) = match previous {
        Some(_) => (UPDATE_SYSTEM, SummaryKind::Update),
        None => (SEGMENT_SYSTEM, SummaryKind::Segment),
    };
    // The budget is said after the material, not in the instructions: two summaries of
    // overlapping material (a second attempt, a segment summarized again) then share their
    // prefix through the material, which a caching provider and the local engine's kept
    // sequences read again instead of decoding it.
    let system = format!("{}\n\n{}", intro.trim_end(), SUMMARY_FORMAT.trim_end());
    let mut user = format!("{CONVERSATION_OPEN}\n{conversation}\n{CONVERSATION_CLOSE}");
    if let Some(previous) = previous {
        user.push_str(&format!(
            "\n\n{PREVIOUS_OPEN}\n{}\n{PREVIOUS_CLOSE}",
            previous.trim()
        ));
    }
    if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        user.push_str(&format!("\n\n{FOCUS_PREFIX}{focus}"));
    }
    user.push_str("\n\n");
    user.push_str(&budget_line(max_output_tokens));
    user.push_str(match previous {
        Some(_) => "\n\nWrite the updated note now.",
        None => "\n\nWrite the note now.",
    });
    SummaryPrompt {
        system,
        user,
        max_output_tokens,
        kind,
    }
}

/// The sentence that gives a structured summary its budget: the room left under the target,
/// so what to drop when it is tight is said too.
pub(super) fn budget_line(max_output_tokens: usize) -> String {
    format!(
        "Write at most {max_output_tokens} tokens: that is the room left in the context. If the \
         note would be longer, drop the least important items first (Critical Context details, \
         then older Progress items, then Key Decisions) and keep the Goal."
    )
}

/// The prompt that shortens one message of `role` to at most `max_output_tokens`.
pub(crate) fn per_message_prompt(
    role: Role,
    text: &str,
    max_output_tokens: usize,
) -> SummaryPrompt {
    let (template, kind) = match role {
        Role::User => (PER_MESSAGE_USER, SummaryKind::UserMessage),
        _ => (PER_MESSAGE_ASSISTANT, SummaryKind::AssistantMessage),
    };
    SummaryPrompt {
        system: format!(
            "{}\nAnswer in at most {max_output_tokens} tokens.",
            template.trim_end()
        ),
        user: format!("{MESSAGE_OPEN}\n{text}\n{MESSAGE_CLOSE}"),
        max_output_tokens,
        kind,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn update_prompt_carries_previous_summary_and_focus() {
        let prompt = segment_prompt("[m3 user]\nhi", Some("## Goal\nx"), Some("the parser"), 500);
        assert_eq!(prompt.kind, SummaryKind::Update);
        assert!(
            prompt
                .user
                .contains("<previous-summary>\n## Goal\nx\n</previous-summary>")
        );
        assert!(prompt.user.contains("Additional focus: the parser"));
        assert!(prompt.system.contains("## Critical Context"));
        assert!(
            prompt.user.contains("at most 500 tokens"),
            "{}",
            prompt.user
        );
        let first = segment_prompt("[m3 user]\nhi", None, None, 500);
        assert_eq!(first.kind, SummaryKind::Segment);
        assert!(!first.user.contains(PREVIOUS_OPEN));
        assert!(first.user.contains("at most 500 tokens"));
        // The budget comes after the material: prompts of one segment with two budgets share
        // their system prompt and material as one prefix.
        let other = segment_prompt("[m3 user]\nhi", None, None, 200);
        assert_eq!(other.system, first.system);
        let material = "<conversation>\n[m3 user]\nhi\n</conversation>";
        assert!(first.user.starts_with(material) && other.user.starts_with(material));
        let short = per_message_prompt(Role::User, "text", 40);
        assert!(
            short.system.contains("at most 40 tokens"),
            "{}",
            short.system
        );
    }
}
