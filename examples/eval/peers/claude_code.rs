//! `claude-code`, emulated from its documented auto-compact: it triggers at the window less
//! min(max output, 20k) less a 13k buffer; the summary replaces everything but the system
//! prompt; up to 5 recently read files are re-attached (≤ 5k tokens each, 50k in all); the
//! summary call is the conversation plus an instruction, so it rides the cached prefix.
//!
//! The 20k, 13k, 5k and 50k figures assume a 200k window and are scaled to the window
//! ([`scaled`]): at 32k the trigger is 32k − 3.2k − 2.08k (83.5 % of the window, as at 200k),
//! a re-attached file at most 800 tokens.

use troupe::compaction::transcript::ledger_from_transcript;
use troupe::protocol::FileAccess;
use troupe::protocol::{ChatMessage, Role};
use troupe::tokens::TokenCounter;

use super::live::{Env, Peer};
use super::summarizer::{
    SummarizerCall, leading_system, scaled, summarize, summary_message, truncate_to,
};

/// min(max output, 20k): Claude models' max output is above 20k.
const OUTPUT_RESERVE: usize = 20_000;
/// The auto-compact buffer below the effective window.
const BUFFER: usize = 13_000;
/// Recently read files re-attached after a compaction.
const FILES: usize = 5;
const FILE_TOKENS: usize = 5_000;
const FILES_TOTAL_TOKENS: usize = 50_000;

/// Claude Code's compact instruction, in short (the real one asks for nine sections).
const INSTRUCTION: &str = "Your task is to create a detailed summary of the conversation so far, \
paying close attention to the user's explicit requests and your previous actions. Include the \
primary request and intent, key technical concepts, files and code sections, errors and fixes, \
problem solving, all user messages, pending tasks, current work and an optional next step.";

/// What the summary message starts with.
const SUMMARY_LEAD: &str = "This session is being continued from a previous conversation that \
ran out of context. The conversation is summarized below:\n";

#[derive(Default)]
pub(super) struct ClaudeCode {
    /// Files read so far, oldest first, each with the content of its latest read (Claude Code
    /// keeps its read-file state across compactions).
    reads: Vec<(String, String)>,
}

impl ClaudeCode {
    pub(super) fn trigger_tokens(window: usize) -> usize {
        window - scaled(OUTPUT_RESERVE, window) - scaled(BUFFER, window)
    }

    /// Remember every whole or partial file read the history shows, newest last.
    fn note_reads(&mut self, history: &[ChatMessage]) {
        for entry in ledger_from_transcript(history).entries() {
            if entry.access != FileAccess::Read {
                continue;
            }
            let Some(call) = entry.tool_call_id.as_deref() else {
                continue;
            };
            let Some(result) = history
                .iter()
                .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(call))
            else {
                continue;
            };
            self.reads.retain(|(path, _)| *path != entry.path);
            self.reads.push((entry.path.clone(), result.text()));
        }
    }

    /// The newest reads as attachments: at most [`FILES`], each and all within their bounds.
    fn attachments(&self, window: usize, counter: &dyn TokenCounter) -> Vec<ChatMessage> {
        let mut left = scaled(FILES_TOTAL_TOKENS, window);
        let mut out = Vec::new();
        for (path, content) in self.reads.iter().rev().take(FILES) {
            let body = truncate_to(content, scaled(FILE_TOKENS, window).min(left), counter);
            left = left.saturating_sub(counter.count(&body));
            out.push(ChatMessage::user(format!(
                "Called the Read tool with the following input: {{\"file_path\":\"{path}\"}}\n\
                 Result of calling the Read tool:\n{body}"
            )));
            if left == 0 {
                break;
            }
        }
        // Oldest first, as they were read.
        out.reverse();
        out
    }
}

impl Peer for ClaudeCode {
    fn compact(
        &mut self,
        history: &mut Vec<ChatMessage>,
        env: &Env<'_>,
    ) -> Option<Vec<SummarizerCall>> {
        if env.counter.count_messages(history) < Self::trigger_tokens(env.window) {
            return None;
        }
        let system = leading_system(history);
        if system == history.len() {
            return None;
        }
        self.note_reads(history);
        let summary = summarize(&history[system..], None, env.summary_tokens);
        let call = summary.inline_call(history, INSTRUCTION, env.counter);
        let mut next: Vec<ChatMessage> = history[..system].to_vec();
        next.push(summary_message(format!("{SUMMARY_LEAD}{}", summary.text)));
        next.extend(self.attachments(env.window, env.counter));
        *history = next;
        Some(vec![call])
    }
}
