//! Whether a model's summary can replace real messages: [`vet_summary`].
//!
//! A weak or confused model can answer a summary prompt with something that looks like an
//! answer but carries nothing: the bare section skeleton, a JSON blob repeated until the token
//! limit, the instructions read back, a confident note about work that never happened. Once it
//! replaces the messages, what they said is gone from the agent's view. So a model's answer is
//! checked before it is used, and the mechanical summary stands in when a check fails. The
//! checks are plain text statistics: deterministic, cheap, and testable without a model.
//!
//! `checks.rs` holds the checks and their thresholds; this module the verdict and its reasons.

mod checks;
#[cfg(test)]
mod tests;

use thiserror::Error;

use super::format::{SECTIONS, normalize_summary};
use super::prompt::{SummaryKind, SummaryPrompt};
use checks::{
    check_budget, check_grounding, check_prompt_echo, check_prose, check_repetition,
    check_structure,
};
use troupe_tokens::TokenCounter;

/// Why a model's summary was not trusted. Its text reads as the end of "the answer was
/// rejected because …", and is what the report's `fallbacks` entry shows.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SummaryRejection {
    /// Nothing at all, or nothing but tags.
    #[error("its answer was empty")]
    Empty,
    /// The section skeleton with placeholders only.
    #[error("its answer had no content beyond the section headings")]
    Skeleton,
    /// Sections of the required structure are absent.
    #[error("its answer lacks the sections {}", .0.join(", "))]
    MissingSections(Vec<String>),
    /// Too few sections say anything.
    #[error(
        "its answer fills only {filled} of the {total} sections (at least {required} needed)",
        total = SECTIONS.len()
    )]
    ThinSections {
        /// Sections with content.
        filled: usize,
        /// Sections that must have content.
        required: usize,
    },
    /// The same line comes back again and again.
    #[error("its answer repeats the line `{line}` {times} times")]
    RepeatedLine {
        /// The line (trimmed, shortened).
        line: String,
        /// How often it occurs.
        times: usize,
    },
    /// The same block of lines comes back again and again.
    #[error("its answer repeats a {lines}-line block starting `{first}` {times} times")]
    RepeatedBlock {
        /// The block's first line (trimmed, shortened).
        first: String,
        /// Lines in the block.
        lines: usize,
        /// How often it occurs.
        times: usize,
    },
    /// Most of its phrases are copies of other phrases in it (a loop within lines).
    #[error("its answer loops: {percent}% of its {words}-word phrases are repeats")]
    RepeatedPhrases {
        /// Share of repeated phrases, in percent.
        percent: usize,
        /// Words per phrase.
        words: usize,
    },
    /// It copies the prompt's framing: conversation tags or message headers.
    #[error("its answer echoes the prompt (`{0}`)")]
    EchoesPrompt(String),
    /// It copies the instructions.
    #[error("its answer echoes the instructions ({lines} lines copied, e.g. `{example}`)")]
    EchoesInstructions {
        /// Instruction lines copied verbatim.
        lines: usize,
        /// One of them (shortened).
        example: String,
    },
    /// Mostly JSON or code where the summary's prose belongs.
    #[error("its answer is mostly JSON or code ({percent}% of its lines), not a summary")]
    NotProse {
        /// Share of JSON/code lines, in percent.
        percent: usize,
    },
    /// Its words are not the transcript's.
    #[error(
        "its answer is not taken from the transcript: only {grounded} of its {distinctive} distinctive words occur there"
    )]
    Ungrounded {
        /// Distinctive words that occur in the summarized text.
        grounded: usize,
        /// Distinctive words in the answer.
        distinctive: usize,
    },
    /// Longer than the room it was given.
    #[error("its answer takes {tokens} tokens, over its budget of {budget}")]
    OverBudget {
        /// The answer's tokens.
        tokens: usize,
        /// `max_output_tokens` of the prompt.
        budget: usize,
    },
}

/// Whether `answer`, a summarizer's reply to `prompt`, may stand for the messages it summarizes;
/// `Err` names the first check that failed.
///
/// Every answer must not be degenerate (the same line or block of lines over and over, phrases
/// looping within lines, the prompt's tags or headers or instruction lines copied back), must
/// draw at least `MIN_GROUNDED_SHARE` (35%) of its distinctive words from the prompt's material, and
/// must fit `max_output_tokens` (counted with `counter`, with a little slack). Structured
/// summaries ([`SummaryKind::Segment`], [`SummaryKind::Update`]) must also carry every section and
/// Progress subsection, have content in at least `MIN_FILLED_SECTIONS` (3) sections, and be mostly
/// prose rather than JSON or code.
///
/// ```
/// use troupe_compaction::summary::{SummaryRejection, segment_prompt, vet_summary};
/// use troupe_tokens::CharEstimateCounter;
/// let prompt = segment_prompt("[m1 user]\nFix the parser in src/lib.rs", None, None, 500);
/// let skeleton = "## Goal\n- (not provided)\n## Progress\n### Done\n- (none)";
/// assert_eq!(
///     vet_summary(skeleton, &prompt, &CharEstimateCounter),
///     Err(SummaryRejection::Skeleton)
/// );
/// ```
pub fn vet_summary(
    answer: &str,
    prompt: &SummaryPrompt,
    counter: &dyn TokenCounter,
) -> Result<(), SummaryRejection> {
    let structured = matches!(prompt.kind, SummaryKind::Segment | SummaryKind::Update);
    let body = if structured {
        normalize_summary(answer).ok_or(SummaryRejection::Empty)?
    } else {
        answer.trim().to_string()
    };
    if body.is_empty() {
        return Err(SummaryRejection::Empty);
    }
    check_prompt_echo(answer, &prompt.system)?;
    check_repetition(answer)?;
    if structured {
        check_prose(&body)?;
        check_structure(answer, &body)?;
    }
    check_grounding(&body, &prompt.user)?;
    check_budget(answer, prompt.max_output_tokens, counter)
}
