//! The checks [`vet_summary`](super::vet_summary) runs, each a plain text statistic, and their
//! thresholds.

use std::collections::{BTreeSet, HashMap};

use super::SummaryRejection;
use crate::summary::format::{PROGRESS_SUBSECTIONS, SECTIONS, missing_sections};
use crate::summary::prompt::{
    CONVERSATION_CLOSE, CONVERSATION_OPEN, MESSAGE_CLOSE, MESSAGE_OPEN, PREVIOUS_CLOSE,
    PREVIOUS_OPEN,
};
use crate::summary::render::parse_header;
use troupe_tokens::TokenCounter;

/// Of the six sections, how many must say something beyond a placeholder.
pub(super) const MIN_FILLED_SECTIONS: usize = 3;
/// The share of a summary's distinctive words that must occur in the text it summarizes.
pub(super) const MIN_GROUNDED_SHARE: f64 = 0.35;
/// Below this many distinctive words, a summary is too short to judge where its words came from.
const MIN_WORDS_TO_JUDGE_GROUNDING: usize = 8;
/// A content line seen this many times is a loop, not a summary.
const MAX_LINE_REPEATS: usize = 3;
/// A block of [`BLOCK_LINES`] lines seen this many times is a loop.
const MAX_BLOCK_REPEATS: usize = 2;
/// Lines in a repeated block.
const BLOCK_LINES: usize = 3;
/// Words per phrase when looking for a loop inside long lines.
const PHRASE_WORDS: usize = 8;
/// A text in which more than this share of phrases are repeats is a loop.
const MAX_REPEATED_PHRASE_SHARE: f64 = 0.5;
/// Fewest words before phrase repetition is judged (short texts repeat by chance).
const MIN_WORDS_FOR_PHRASES: usize = 40;
/// Lines shorter than this (after bullets) are too generic to count as a repeated line.
const MIN_REPEATED_LINE_CHARS: usize = 12;
/// Instruction lines copied verbatim from the system prompt that make an answer an echo.
const MAX_ECHOED_INSTRUCTION_LINES: usize = 2;
/// More than this share of JSON/code lines is not a summary.
const MAX_CODE_SHARE: f64 = 0.5;
/// Tokens over `max_output_tokens` tolerated, as a share of it (the answer's count and the
/// model's own count differ slightly).
const BUDGET_SLACK_SHARE: f64 = 0.1;
/// The least slack, for small budgets.
const MIN_BUDGET_SLACK: usize = 16;

/// Words too common in any summary to show where its content came from.
const GENERIC_WORDS: &[&str] = &[
    "about",
    "above",
    "added",
    "after",
    "again",
    "also",
    "asked",
    "because",
    "before",
    "being",
    "both",
    "change",
    "changes",
    "check",
    "checked",
    "code",
    "completed",
    "continue",
    "could",
    "current",
    "decided",
    "done",
    "each",
    "every",
    "file",
    "files",
    "first",
    "from",
    "goal",
    "have",
    "into",
    "made",
    "make",
    "more",
    "must",
    "need",
    "needs",
    "next",
    "none",
    "once",
    "only",
    "other",
    "progress",
    "provided",
    "same",
    "should",
    "some",
    "step",
    "steps",
    "still",
    "such",
    "than",
    "that",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "user",
    "were",
    "what",
    "when",
];

/// A line's text without indentation and list markers.
fn bare(line: &str) -> &str {
    line.trim()
        .trim_start_matches(['-', '*', '+', ' '])
        .trim_start_matches("[x]")
        .trim_start_matches("[ ]")
        .trim()
}

/// A line that carries nothing: blank, a heading, a fence, a tag, or a placeholder.
fn is_filler(line: &str) -> bool {
    let t = line.trim();
    let b = bare(t);
    t.is_empty()
        || t.starts_with('#')
        || t.starts_with("```")
        || (t.starts_with('<') && t.ends_with('>') && !t.contains(' '))
        || b.is_empty()
        || b.starts_with("(none")
        || b.starts_with("(not provided")
        || b.eq_ignore_ascii_case("none")
        || b.eq_ignore_ascii_case("n/a")
}

fn shorten(line: &str) -> String {
    const MAX: usize = 60;
    if line.chars().count() <= MAX {
        line.to_string()
    } else {
        format!("{}…", line.chars().take(MAX).collect::<String>())
    }
}

pub(super) fn check_prompt_echo(answer: &str, system: &str) -> Result<(), SummaryRejection> {
    const TAGS: [&str; 6] = [
        CONVERSATION_OPEN,
        CONVERSATION_CLOSE,
        PREVIOUS_OPEN,
        PREVIOUS_CLOSE,
        MESSAGE_OPEN,
        MESSAGE_CLOSE,
    ];
    if let Some(line) = answer
        .lines()
        .map(str::trim)
        .find(|t| TAGS.contains(t) || parse_header(t).is_some())
    {
        return Err(SummaryRejection::EchoesPrompt(shorten(line)));
    }
    let instructions: BTreeSet<&str> = system
        .lines()
        .filter(|l| !is_filler(l))
        .map(bare)
        .filter(|b| b.len() >= MIN_REPEATED_LINE_CHARS)
        .collect();
    let copied: Vec<&str> = answer
        .lines()
        .filter(|l| !is_filler(l))
        .map(bare)
        .filter(|b| instructions.contains(b))
        .collect();
    if copied.len() >= MAX_ECHOED_INSTRUCTION_LINES {
        return Err(SummaryRejection::EchoesInstructions {
            lines: copied.len(),
            example: shorten(copied[0]),
        });
    }
    Ok(())
}

pub(super) fn check_repetition(answer: &str) -> Result<(), SummaryRejection> {
    let lines: Vec<&str> = answer
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // The same content line, over and over.
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for line in lines.iter().filter(|l| !is_filler(l)) {
        if bare(line).chars().count() >= MIN_REPEATED_LINE_CHARS {
            *counts.entry(line).or_default() += 1;
        }
    }
    if let Some((line, times)) = counts
        .iter()
        .filter(|(_, n)| **n > MAX_LINE_REPEATS)
        .max_by_key(|(line, n)| (**n, std::cmp::Reverse(**line)))
    {
        return Err(SummaryRejection::RepeatedLine {
            line: shorten(line),
            times: *times,
        });
    }
    // The same block of lines (e.g. a pretty-printed JSON object), over and over.
    let mut blocks: HashMap<&[&str], usize> = HashMap::new();
    for window in lines.windows(BLOCK_LINES) {
        if window.iter().any(|l| !is_filler(l)) {
            *blocks.entry(window).or_default() += 1;
        }
    }
    if let Some((block, times)) = blocks
        .iter()
        .filter(|(_, n)| **n > MAX_BLOCK_REPEATS)
        .max_by_key(|(block, n)| (**n, std::cmp::Reverse(**block)))
    {
        return Err(SummaryRejection::RepeatedBlock {
            first: shorten(block[0]),
            lines: BLOCK_LINES,
            times: *times,
        });
    }
    // A loop without line breaks: most word phrases occur earlier in the text.
    let words: Vec<&str> = answer.split_whitespace().collect();
    if words.len() >= MIN_WORDS_FOR_PHRASES {
        let mut seen = BTreeSet::new();
        let mut repeats = 0usize;
        let phrases = words.windows(PHRASE_WORDS);
        let total = phrases.len();
        for phrase in phrases {
            if !seen.insert(phrase) {
                repeats += 1;
            }
        }
        let share = repeats as f64 / total as f64;
        if share > MAX_REPEATED_PHRASE_SHARE {
            return Err(SummaryRejection::RepeatedPhrases {
                percent: (share * 100.0).round() as usize,
                words: PHRASE_WORDS,
            });
        }
    }
    Ok(())
}

/// A line that reads as JSON or code rather than prose.
fn looks_like_code(line: &str) -> bool {
    let t = line.trim();
    let starts_code = ['{', '}', '[', ']', '"'].iter().any(|c| t.starts_with(*c));
    let ends_code = ['{', '}', '[', ']', ',', ';', '(']
        .iter()
        .any(|c| t.ends_with(*c));
    starts_code || (ends_code && !t.starts_with(['-', '*']) && !t.ends_with("),"))
}

pub(super) fn check_prose(body: &str) -> Result<(), SummaryRejection> {
    let mut in_fence = false;
    let mut content = 0usize;
    let mut code = 0usize;
    for line in body.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if t.is_empty() || (!in_fence && is_filler(t)) {
            continue;
        }
        content += 1;
        if in_fence || looks_like_code(t) {
            code += 1;
        }
    }
    if content == 0 {
        return Ok(());
    }
    let share = code as f64 / content as f64;
    if share > MAX_CODE_SHARE {
        return Err(SummaryRejection::NotProse {
            percent: (share * 100.0).round() as usize,
        });
    }
    Ok(())
}

pub(super) fn check_structure(answer: &str, body: &str) -> Result<(), SummaryRejection> {
    let filled = filled_sections(body);
    if filled == 0 {
        return Err(SummaryRejection::Skeleton);
    }
    let missing = missing_sections(answer);
    if !missing.is_empty() {
        return Err(SummaryRejection::MissingSections(missing));
    }
    if filled < MIN_FILLED_SECTIONS {
        return Err(SummaryRejection::ThinSections {
            filled,
            required: MIN_FILLED_SECTIONS,
        });
    }
    Ok(())
}

/// How many of the six sections have a content line (Progress: in any subsection).
fn filled_sections(body: &str) -> usize {
    let mut filled = BTreeSet::new();
    let mut current: Option<&str> = None;
    for line in body.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("## ") {
            let name = name.trim().trim_end_matches(':').trim();
            current = SECTIONS
                .iter()
                .find(|s| s.eq_ignore_ascii_case(name))
                .copied();
        } else if let Some(name) = t.strip_prefix("### ") {
            let name = name.trim().trim_end_matches(':').trim();
            if PROGRESS_SUBSECTIONS
                .iter()
                .any(|s| s.eq_ignore_ascii_case(name))
            {
                current = Some("Progress");
            }
        } else if !is_filler(t)
            && let Some(section) = current
        {
            filled.insert(section);
        }
    }
    filled.len()
}

/// The key a word is compared by: lowercase, and its first five letters for longer words, so
/// that "implemented" in a summary matches "implement" in the transcript.
fn word_key(word: &str) -> String {
    word.to_lowercase().chars().take(5).collect()
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

pub(super) fn check_grounding(body: &str, material: &str) -> Result<(), SummaryRejection> {
    let source: BTreeSet<String> = words(material).map(word_key).collect();
    let distinctive: BTreeSet<String> = body
        .lines()
        .filter(|l| !is_filler(l))
        .flat_map(words)
        .filter(|w| w.chars().count() >= 4 && !w.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
        .filter(|w| !GENERIC_WORDS.contains(&w.as_str()))
        .collect();
    if distinctive.len() < MIN_WORDS_TO_JUDGE_GROUNDING {
        return Ok(());
    }
    let grounded = distinctive
        .iter()
        .filter(|w| source.contains(&word_key(w)))
        .count();
    if (grounded as f64) < MIN_GROUNDED_SHARE * distinctive.len() as f64 {
        return Err(SummaryRejection::Ungrounded {
            grounded,
            distinctive: distinctive.len(),
        });
    }
    Ok(())
}

pub(super) fn check_budget(
    answer: &str,
    budget: usize,
    counter: &dyn TokenCounter,
) -> Result<(), SummaryRejection> {
    let slack = ((budget as f64 * BUDGET_SLACK_SHARE).ceil() as usize).max(MIN_BUDGET_SLACK);
    let tokens = counter.count(answer.trim());
    if tokens > budget + slack {
        return Err(SummaryRejection::OverBudget { tokens, budget });
    }
    Ok(())
}
