//! Whether a model's summary can replace real messages: [`vet_summary`].
//!
//! A weak or confused model can answer a summary prompt with something that looks like an
//! answer but carries nothing: the bare section skeleton, a JSON blob repeated until the token
//! limit, the instructions read back, a confident note about work that never happened. Once it
//! replaces the messages, what they said is gone from the agent's view. So a model's answer is
//! checked before it is used, and the mechanical summary stands in when a check fails. The
//! checks are plain text statistics: deterministic, cheap, and testable without a model.

use std::collections::{BTreeSet, HashMap};

use thiserror::Error;

use super::format::{PROGRESS_SUBSECTIONS, SECTIONS, missing_sections, normalize_summary};
use super::prompt::{
    CONVERSATION_CLOSE, CONVERSATION_OPEN, MESSAGE_CLOSE, MESSAGE_OPEN, PREVIOUS_CLOSE,
    PREVIOUS_OPEN, SummaryKind, SummaryPrompt,
};
use super::render::parse_header;
use crate::counter::TokenCounter;

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
/// use troupe_compaction::{CharEstimateCounter, SummaryRejection, segment_prompt, vet_summary};
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

fn check_prompt_echo(answer: &str, system: &str) -> Result<(), SummaryRejection> {
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

fn check_repetition(answer: &str) -> Result<(), SummaryRejection> {
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

fn check_prose(body: &str) -> Result<(), SummaryRejection> {
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

fn check_structure(answer: &str, body: &str) -> Result<(), SummaryRejection> {
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

fn check_grounding(body: &str, material: &str) -> Result<(), SummaryRejection> {
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

fn check_budget(
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::counter::CharEstimateCounter;
    use crate::summary::prompt::{per_message_prompt, segment_prompt};
    use troupe_runtime::Role;

    const CONVERSATION: &str = "[m1 user]\nThe tokenizer in src/lexer.rs panics on unterminated strings. Fix it without allocating; keep the public API of Lexer::next_token.\n[m2 assistant]\nI will read the lexer first.\n→ read_file {\"path\": \"src/lexer.rs\"}\n[m3 tool read_file]\nfn next_token(&mut self) -> Token { match self.peek() { '\"' => self.quoted(), _ => self.word() } }\n[m4 assistant]\nThe root cause is quoted() indexing past the end. I decided to return Token::Error instead of panicking.\n→ edit_file {\"path\": \"src/lexer.rs\"}\n[m5 tool edit_file]\nok\n[m6 user]\nGood. Now run cargo test and add a regression test for the unterminated string.";

    const GOOD: &str = "## Goal\n- Stop the tokenizer in src/lexer.rs from panicking on unterminated strings.\n\n## Constraints & Preferences\n- No allocation; keep the public API of Lexer::next_token.\n\n## Progress\n### Done\n- [x] Found the root cause: quoted() indexes past the end.\n- [x] Edited src/lexer.rs so quoted() returns Token::Error.\n### In Progress\n- [ ] Regression test for the unterminated string.\n### Blocked\n- (none)\n\n## Key Decisions\n- **Return Token::Error instead of panicking**: callers already handle error tokens.\n\n## Next Steps\n1. Add the regression test.\n2. Run cargo test.\n\n## Critical Context\n- Lexer::next_token dispatches to quoted() on a '\"'.";

    fn prompt() -> SummaryPrompt {
        segment_prompt(CONVERSATION, None, None, 400)
    }

    fn vet(answer: &str) -> Result<(), SummaryRejection> {
        vet_summary(answer, &prompt(), &CharEstimateCounter)
    }

    #[test]
    fn a_faithful_structured_summary_is_trusted() {
        assert_eq!(vet(GOOD), Ok(()));
        // Wrapped in a fence and tags, as models like to do: still the same summary.
        assert_eq!(
            vet(&format!("```markdown\n<summary>\n{GOOD}\n</summary>\n```")),
            Ok(())
        );
    }

    #[test]
    fn the_bare_skeleton_is_rejected_as_a_skeleton() {
        let skeleton = "## Goal\n- (not provided)\n## Constraints & Preferences\n- (none)\n## Progress\n### Done\n- (not provided)\n### In Progress\n- (none)\n### Blocked\n- (none)\n## Key Decisions\n- none\n## Next Steps\n- (not provided)\n## Critical Context\n- n/a";
        assert_eq!(vet(skeleton), Err(SummaryRejection::Skeleton));
        assert_eq!(
            vet("  \n<summary>\n</summary>"),
            Err(SummaryRejection::Empty)
        );
        assert_eq!(
            vet(skeleton).unwrap_err().to_string(),
            "its answer had no content beyond the section headings"
        );
    }

    #[test]
    fn missing_and_thin_sections_are_rejected() {
        let cut = GOOD.split("## Next Steps").next().unwrap();
        assert_eq!(
            vet(cut),
            Err(SummaryRejection::MissingSections(vec![
                "Next Steps".into(),
                "Critical Context".into()
            ]))
        );
        let thin = "## Goal\n- Fix the tokenizer panic in src/lexer.rs.\n## Constraints & Preferences\n- (none)\n## Progress\n### Done\n- (none)\n### In Progress\n- (none)\n### Blocked\n- (none)\n## Key Decisions\n- (none)\n## Next Steps\n1. Run cargo test.\n## Critical Context\n- (none)";
        assert_eq!(
            vet(thin),
            Err(SummaryRejection::ThinSections {
                filled: 2,
                required: MIN_FILLED_SECTIONS
            })
        );
    }

    #[test]
    fn loops_are_rejected() {
        let line = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lexer.rs\"}}\n";
        let looping_line = format!("## Goal\n{}", line.repeat(6));
        assert!(
            matches!(
                vet(&looping_line),
                Err(SummaryRejection::RepeatedLine { times: 6, .. })
            ),
            "{:?}",
            vet(&looping_line)
        );
        let block =
            "- Found the root cause in quoted().\n- Edited src/lexer.rs.\n- Ran cargo test.\n";
        let looping_block = format!("{GOOD}\n{}", block.repeat(3));
        assert!(
            matches!(
                vet(&looping_block),
                Err(SummaryRejection::RepeatedBlock {
                    times: 3,
                    lines: 3,
                    ..
                })
            ),
            "{:?}",
            vet(&looping_block)
        );
        let one_line = format!(
            "{GOOD}\n- {}",
            "the lexer returns Token::Error for quoted strings now and ".repeat(20)
        );
        assert!(
            matches!(
                vet(&one_line),
                Err(SummaryRejection::RepeatedPhrases { .. })
            ),
            "{:?}",
            vet(&one_line)
        );
    }

    #[test]
    fn echoes_of_the_prompt_are_rejected() {
        let copied = format!("{GOOD}\n[m3 tool read_file]\nfn next_token(&mut self) -> Token");
        assert_eq!(
            vet(&copied),
            Err(SummaryRejection::EchoesPrompt("[m3 tool read_file]".into()))
        );
        let instructions = GOOD.replace(
            "## Next Steps\n1. Add the regression test.\n2. Run cargo test.",
            "## Next Steps\n1. The next concrete action.\n2. The actions after it, in order.",
        );
        assert!(
            matches!(
                vet(&instructions),
                Err(SummaryRejection::EchoesInstructions { lines: 2, .. })
            ),
            "{:?}",
            vet(&instructions)
        );
    }

    #[test]
    fn json_or_code_instead_of_prose_is_rejected() {
        let json = "```json\n{\n  \"goal\": \"fix the tokenizer\",\n  \"files\": [\"src/lexer.rs\"],\n  \"done\": [\"edited quoted()\"],\n  \"next\": \"run cargo test\"\n}\n```";
        assert!(
            matches!(vet(json), Err(SummaryRejection::NotProse { .. })),
            "{:?}",
            vet(json)
        );
        // A short snippet in Critical Context is fine.
        let snippet = GOOD.replace(
            "- Lexer::next_token dispatches to quoted() on a '\"'.",
            "```rust\nmatch self.peek() { '\"' => self.quoted(), _ => self.word() }\n```",
        );
        assert_eq!(vet(&snippet), Ok(()));
    }

    #[test]
    fn a_summary_of_something_else_is_rejected() {
        let invented = "## Goal\n- Deploy the Kubernetes cluster on AWS with Terraform.\n## Constraints & Preferences\n- Budget approval from finance department.\n## Progress\n### Done\n- [x] Provisioned networking modules and security groups.\n### In Progress\n- [ ] Helm charts for monitoring dashboards.\n### Blocked\n- (none)\n## Key Decisions\n- **Managed Postgres**: cheaper maintenance.\n## Next Steps\n1. Configure autoscaling policies.\n## Critical Context\n- Region eu-west-1.";
        assert!(
            matches!(vet(invented), Err(SummaryRejection::Ungrounded { .. })),
            "{:?}",
            vet(invented)
        );
    }

    #[test]
    fn an_answer_over_its_budget_is_rejected() {
        let small = segment_prompt(CONVERSATION, None, None, 60);
        let tokens = CharEstimateCounter.count(GOOD);
        assert_eq!(
            vet_summary(GOOD, &small, &CharEstimateCounter),
            Err(SummaryRejection::OverBudget { tokens, budget: 60 })
        );
        // A little over is tolerated.
        let close = segment_prompt(CONVERSATION, None, None, tokens - 5);
        assert_eq!(vet_summary(GOOD, &close, &CharEstimateCounter), Ok(()));
    }

    #[test]
    fn a_shortened_message_needs_no_sections_but_must_not_loop() {
        let prompt = per_message_prompt(Role::User, CONVERSATION, 100);
        let short = "The tokenizer in src/lexer.rs panics on unterminated strings; fix it without allocating.";
        assert_eq!(vet_summary(short, &prompt, &CharEstimateCounter), Ok(()));
        let looping = "Fix the tokenizer in src/lexer.rs now.\n".repeat(5);
        assert!(matches!(
            vet_summary(&looping, &prompt, &CharEstimateCounter),
            Err(SummaryRejection::RepeatedLine { .. })
        ));
    }
}
