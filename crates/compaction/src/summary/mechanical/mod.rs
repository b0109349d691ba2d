//! A summarizer that needs no model: the `--model none` fallback.
//!
//! It reads the rendered messages back out of the prompt and fills the six sections from facts
//! it can extract mechanically: the user's first request and later corrections, the choices
//! and intents the assistant stated in its prose, the constraints the user stated, the tools
//! used with their counts, error lines, the last state of the work. Headings, lead-ins, code,
//! tool output and pasted shell sessions are never quoted as statements ([`prose`]). The answer
//! fits `max_output_tokens`: the least important items are dropped first ([`fit`]). Weaker
//! than a model at judging what matters, but deterministic, it never invents anything, never
//! fails, and costs nothing. File lists are added by compaction from the ledger, as for any
//! summarizer.

mod facts;
pub(crate) mod fit;
mod layout;
mod prose;

use async_trait::async_trait;

use self::facts::{between, gather};
use self::layout::{condense, lay_out};
use super::prompt::{MESSAGE_CLOSE, MESSAGE_OPEN, SummaryKind, SummaryPrompt};
use super::summarizer::{Summarizer, SummarizerError};

/// Characters per token assumed when fitting the answer into `max_output_tokens` (what
/// [`CharEstimateCounter`](troupe_tokens::CharEstimateCounter) assumes; compaction re-fits with
/// its own counter).
const CHARS_PER_TOKEN: usize = 4;

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
        let budget = prompt.max_output_tokens.max(10);
        match prompt.kind {
            SummaryKind::UserMessage | SummaryKind::AssistantMessage => {
                let text = between(&prompt.user, MESSAGE_OPEN, MESSAGE_CLOSE).unwrap_or("");
                let short = condense(text, budget * CHARS_PER_TOKEN);
                if short.is_empty() {
                    Err(SummarizerError::Empty)
                } else {
                    Ok(short)
                }
            }
            SummaryKind::Segment | SummaryKind::Update => Ok(lay_out(&gather(&prompt.user))
                .fit(budget, |text| {
                    text.chars().count().div_ceil(CHARS_PER_TOKEN)
                })),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_protocol::Role;

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
        assert!(
            text.chars().count() <= 100 * CHARS_PER_TOKEN,
            "{}",
            text.len()
        );
        assert!(missing_sections(&text).is_empty());
        let short = run(per_message_prompt(Role::User, &"word ".repeat(200), 50));
        assert!(short.chars().count() <= 50 * CHARS_PER_TOKEN);
    }
}
