//! The summary call that rides the agent's cached prompt: [`inline_summary`].
//!
//! A provider caches prompt prefixes, and the agent has just sent its conversation: a summary
//! request that begins with exactly those messages is read from the cache at about a tenth of
//! the price, where a prompt of its own (instructions, then the segment rendered as text) shares
//! nothing with it and is billed in full. So when the summarizer is the agent's own model, the
//! request is the agent's messages as it sent them, byte for byte, then one user message that
//! says what to summarize — the instructions last, as pi moved them for this very reason.
//!
//! Which prefix: the agent's last request, every message before the newest assistant message
//! (the answer to it). It is the longest prefix the provider certainly holds — the tool results
//! added since were never sent — and it is where the agent's last call ended, so with
//! Anthropic-style breakpoints it is read at 0.1× where a prefix that ends at the segment's last
//! message, though shorter, is a point no recent call ended at and is written anew at 1.25×
//! (with OpenAI-style caching the shorter one is a little cheaper: both are read cached). The
//! messages after the segment stay in the context, so the instruction names where the segment
//! ends and says to leave the rest out. When that prefix does not fit the summarizer's window
//! beside the reserved answer, the prefix ending at the segment's last message is tried; when
//! neither fits, the caller sends the separate prompt.

use troupe_protocol::{ChatMessage, MessageKind, Role};

use super::prompt::{FOCUS_PREFIX, SUMMARY_FORMAT, SummaryKind, SummaryPrompt, budget_line};
use crate::pairing::{owner_of, tool_name};
use crate::truncate::floor_boundary;
use troupe_tokens::TokenCounter;

const INLINE_SEGMENT: &str = include_str!("../../prompts/inline_segment.md");
const INLINE_UPDATE: &str = include_str!("../../prompts/inline_update.md");

/// Tokens kept free in the request (counts of joined parts differ slightly from their sums,
/// and the model's tokenizer may differ from ours).
const SLACK_TOKENS: usize = 32;
/// Words quoted from a message to say where the segment starts or ends.
const QUOTED_WORDS: usize = 10;
/// Bytes quoted at most (a path or a long token counts as one word).
const QUOTED_BYTES: usize = 90;

/// The segment to summarize, located in the agent's conversation.
#[derive(Debug, Clone, Copy)]
pub struct InlineSegment<'a> {
    /// The agent's conversation as it sends it to its model.
    pub conversation: &'a [ChatMessage],
    /// The tokens of each message of `conversation` (framing included).
    pub tokens: &'a [usize],
    /// Index in `conversation` of the segment's first message.
    pub first: usize,
    /// Index in `conversation` of the segment's last message.
    pub last: usize,
}

/// A summary request that continues the agent's conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct InlineSummary {
    /// The request: a prefix of the agent's conversation, unchanged, then one user message
    /// with the instruction.
    pub messages: Vec<ChatMessage>,
    /// How many of `messages` are the agent's (all but the last).
    pub agent_messages: usize,
    /// The separate prompt of the same segment: what the answer is vetted against (its
    /// material is the segment) and what a summarizer that cannot continue the agent's
    /// conversation is sent instead.
    pub prompt: SummaryPrompt,
    /// Input tokens of `messages` (framing and reply priming included).
    pub input_tokens: usize,
}

/// The request that summarizes `segment` by continuing the agent's conversation, or `None`
/// when no prefix that covers the segment fits in `room` tokens (the summarizer's window less
/// what it adds, such as tool definitions) beside the answer `prompt` reserves. `prompt` is the
/// separate prompt of the same segment; its kind says whether an earlier summary is merged.
pub fn inline_summary(
    segment: InlineSegment<'_>,
    prompt: SummaryPrompt,
    focus: Option<&str>,
    room: usize,
    counter: &dyn TokenCounter,
) -> Option<InlineSummary> {
    let InlineSegment {
        conversation,
        tokens,
        first,
        last,
    } = segment;
    if first > last || last >= conversation.len() || tokens.len() != conversation.len() {
        return None;
    }
    // The agent's last request is everything before the answer to it.
    let answered = conversation
        .iter()
        .rposition(|m| m.role == Role::Assistant && m.kind != MessageKind::DisplayOnly);
    let mut ends = Vec::with_capacity(2);
    if let Some(end) = answered.filter(|&end| end > last + 1) {
        ends.push(end);
    }
    ends.push(last + 1);
    let reserved = prompt.max_output_tokens + counter.overhead().reply_priming + SLACK_TOKENS;
    ends.into_iter().find_map(|end| {
        let instruction = ChatMessage::user(instruction_text(
            conversation,
            first,
            last,
            end,
            &prompt,
            focus,
        ));
        let input_tokens = tokens[..end].iter().sum::<usize>()
            + counter.count_message(&instruction)
            + counter.overhead().reply_priming;
        (input_tokens - counter.overhead().reply_priming + reserved <= room).then(|| {
            let mut messages = conversation[..end].to_vec();
            messages.push(instruction);
            InlineSummary {
                messages,
                agent_messages: end,
                prompt: prompt.clone(),
                input_tokens,
            }
        })
    })
}

/// The instruction at the end of a request whose prefix is `conversation[..end]`.
fn instruction_text(
    conversation: &[ChatMessage],
    first: usize,
    last: usize,
    end: usize,
    prompt: &SummaryPrompt,
    focus: Option<&str>,
) -> String {
    let opening = conversation
        .iter()
        .position(|m| !m.role.is_instructions())
        .unwrap_or(0);
    let after_instructions = if opening > 0 {
        " after the system prompt"
    } else {
        ""
    };
    let mut what = if first <= opening {
        format!("Everything above{after_instructions}")
    } else {
        format!(
            "The messages above from {}",
            locate(conversation, first, false)
        )
    };
    let mut after = String::new();
    if end > last + 1 {
        what.push_str(&format!(", through {},", locate(conversation, last, true)));
        let kept = end - last - 1;
        after = match kept {
            1 => " The one message after that stays as it is: leave it out of the note.".into(),
            n => format!(
                " The {n} messages after that stay as they are: leave them out of the note."
            ),
        };
    } else if first > opening {
        what.push_str(" to the end");
    }
    let template = match prompt.kind {
        SummaryKind::Update => INLINE_UPDATE,
        _ => INLINE_SEGMENT,
    };
    let mut text = format!(
        "{}\n\n{}\n{}",
        template
            .trim_end()
            .replace("{segment}", &what)
            .replace("{after}", &after),
        SUMMARY_FORMAT.trim_end(),
        budget_line(prompt.max_output_tokens)
    );
    if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        text.push_str(&format!("\n\n{FOCUS_PREFIX}{focus}"));
    }
    text.push_str("\n\nWrite the note now.");
    text
}

/// Where a message is, in words the model can find it by: its role (a tool result by its
/// tool's name) and its first or last words.
fn locate(conversation: &[ChatMessage], index: usize, ending: bool) -> String {
    let message = &conversation[index];
    let who = match message.role {
        Role::Tool => match tool_name(conversation, owner_of(conversation, index), index) {
            Some(name) => format!("the `{name}` result"),
            None => "the tool result".to_string(),
        },
        Role::Assistant => match message.calls().first() {
            Some(call) if message.text().trim().is_empty() => {
                format!("your call to `{}`", call.function.name)
            }
            _ => "your message".to_string(),
        },
        Role::User => "the user message".to_string(),
        Role::System | Role::Developer => "the system message".to_string(),
    };
    let words = quote(&message.text(), ending);
    match (words.is_empty(), ending) {
        (true, _) => who,
        (false, true) => format!("{who} that ends “{words}”"),
        (false, false) => format!("{who} that begins “{words}”"),
    }
}

/// The first (or last) few words of `text`, whitespace collapsed, at most [`QUOTED_BYTES`].
fn quote(text: &str, ending: bool) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let picked = if ending {
        &words[words.len().saturating_sub(QUOTED_WORDS)..]
    } else {
        &words[..words.len().min(QUOTED_WORDS)]
    };
    let joined = picked.join(" ");
    if joined.len() <= QUOTED_BYTES {
        return joined;
    }
    if ending {
        let mut start = joined.len() - QUOTED_BYTES;
        while !joined.is_char_boundary(start) {
            start += 1;
        }
        format!("…{}", &joined[start..])
    } else {
        format!("{}…", &joined[..floor_boundary(&joined, QUOTED_BYTES)])
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::summary::segment_prompt;
    use troupe_protocol::ToolCall;
    use troupe_tokens::CharEstimateCounter;

    /// system, task, a read and its result, a question, then the answer still being worked on:
    /// a read whose result the agent has not sent yet.
    fn conversation() -> Vec<ChatMessage> {
        vec![
            ChatMessage::system("You are a coder."),
            ChatMessage::user("Fix the parser in src/lib.rs please"),
            ChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("c1", "read_file", r#"{"path":"src/lib.rs"}"#)],
            ),
            ChatMessage::tool_result("c1", "fn parse() { todo!() } // the end of lib.rs"),
            ChatMessage::user("and the lexer too"),
            ChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("c2", "read_file", r#"{"path":"src/lex.rs"}"#)],
            ),
            ChatMessage::tool_result("c2", "fn lex() {}"),
        ]
    }

    fn tokens(conversation: &[ChatMessage]) -> Vec<usize> {
        conversation
            .iter()
            .map(|m| CharEstimateCounter.count_message(m))
            .collect()
    }

    #[test]
    fn the_request_is_the_agents_last_request_then_the_instruction() {
        let conversation = conversation();
        let tokens = tokens(&conversation);
        let segment = InlineSegment {
            conversation: &conversation,
            tokens: &tokens,
            first: 2,
            last: 3,
        };
        let prompt = segment_prompt("[m3 assistant]\n…", None, Some("the parser"), 300);
        let request = inline_summary(
            segment,
            prompt.clone(),
            Some("the parser"),
            10_000,
            &CharEstimateCounter,
        )
        .unwrap();
        // Everything before the newest assistant message: the request the agent last sent.
        assert_eq!(request.agent_messages, 5);
        assert_eq!(&request.messages[..5], &conversation[..5]);
        let instruction = request.messages[5].text();
        assert_eq!(request.messages[5].role, Role::User);
        assert!(
            instruction.starts_with(
                "Stop working on the task for a moment: this conversation has grown too long"
            ),
            "{instruction}"
        );
        assert!(
            instruction.contains(
                "The messages above from your call to `read_file`, through the `read_file` \
                 result that ends “fn parse() { todo!() } // the end of lib.rs”, will be \
                 replaced by a hand-off note that you write now. The one message after that \
                 stays as it is: leave it out of the note.\nYou keep working"
            ),
            "{instruction}"
        );
        assert!(instruction.contains("## Critical Context"));
        assert!(instruction.contains("at most 300 tokens"));
        assert!(instruction.contains("Additional focus: the parser"));
        assert!(instruction.ends_with("Write the note now."));
        assert_eq!(request.prompt, prompt);
    }

    #[test]
    fn a_segment_from_the_start_to_the_last_request_is_everything_above() {
        let conversation = conversation();
        let tokens = tokens(&conversation);
        let segment = InlineSegment {
            conversation: &conversation,
            tokens: &tokens,
            first: 1,
            last: 4,
        };
        let prompt = segment_prompt("x", None, None, 200);
        let request = inline_summary(segment, prompt, None, 10_000, &CharEstimateCounter).unwrap();
        assert_eq!(request.agent_messages, 5);
        let instruction = request.messages[5].text();
        assert!(
            instruction.contains(
                "Everything above after the system prompt will be replaced by a hand-off note \
                 that you write now.\nYou keep working"
            ),
            "{instruction}"
        );
    }

    #[test]
    fn a_prefix_too_long_for_the_window_shrinks_to_the_segment_then_gives_up() {
        let conversation = conversation();
        let mut tokens = tokens(&conversation);
        // The user message after the segment is huge: only the prefix ending at the segment fits.
        tokens[4] = 5_000;
        let segment = InlineSegment {
            conversation: &conversation,
            tokens: &tokens,
            first: 2,
            last: 3,
        };
        let prompt = segment_prompt("x", None, None, 300);
        let request =
            inline_summary(segment, prompt.clone(), None, 3_000, &CharEstimateCounter).unwrap();
        assert_eq!(request.agent_messages, 4);
        assert_eq!(&request.messages[..4], &conversation[..4]);
        let instruction = request.messages[4].text();
        assert!(
            instruction.contains("from your call to `read_file` to the end will be replaced"),
            "{instruction}"
        );
        assert!(request.input_tokens + 300 <= 3_000);
        assert_eq!(
            inline_summary(segment, prompt, None, 200, &CharEstimateCounter),
            None
        );
    }

    #[test]
    fn an_update_names_the_earlier_note() {
        let conversation = conversation();
        let tokens = tokens(&conversation);
        let segment = InlineSegment {
            conversation: &conversation,
            tokens: &tokens,
            first: 1,
            last: 3,
        };
        let prompt = segment_prompt("x", Some("## Goal\nold"), None, 300);
        let request = inline_summary(segment, prompt, None, 10_000, &CharEstimateCounter).unwrap();
        let instruction = request.messages.last().unwrap().text();
        assert!(instruction.contains("the note written at an earlier checkpoint"));
        assert!(instruction.contains("keep everything from the earlier note"));
    }

    #[test]
    fn quotes_are_short_and_cut_on_char_boundaries() {
        let long = "é".repeat(200);
        assert!(quote(&long, true).len() <= QUOTED_BYTES + "…".len());
        assert!(quote(&long, false).len() <= QUOTED_BYTES + "…".len());
        assert_eq!(quote("  a  b\nc ", false), "a b c");
        let words = (0..30)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            quote(&words, true),
            "w20 w21 w22 w23 w24 w25 w26 w27 w28 w29"
        );
    }
}
