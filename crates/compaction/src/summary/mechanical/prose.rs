//! Which lines of a message are prose a summary may quote, and which sentences state a
//! choice, an intent, a correction or a constraint.
//!
//! Coding sessions are full of text that looks like a statement but is not one: markdown
//! headings ("## Root Cause Analysis"), lead-ins to a code block ("The fix is:"), pasted shell
//! sessions ("$ ls" and its output), code, tables and path listings. Quoting those makes a
//! summary that reads well and says nothing, so they are refused before any keyword matches.

/// Phrases in assistant prose that state a choice.
const DECISION_PHRASES: [&str; 16] = [
    "i'll use",
    "i will use",
    "we'll use",
    "we will use",
    "i'm going to use",
    "i decided",
    "i've decided",
    "we decided",
    "decided to",
    "let's go with",
    "going with",
    "i chose",
    "i'll go with",
    "instead of",
    "rather than",
    "because",
];

/// Openings of assistant prose that state what it will do next.
const INTENT_OPENINGS: [&str; 14] = [
    "next, i",
    "next i",
    "now i'll",
    "now i will",
    "now let me",
    "now let's",
    "let me",
    "let's",
    "i'll",
    "i will",
    "i'm going to",
    "then i'll",
    "then i will",
    "finally, i",
];

/// Words that mark a user message redirecting the work.
const CORRECTION_MARKERS: [&str; 12] = [
    "actually",
    "instead",
    "no,",
    "no.",
    "don't",
    "do not",
    "please also",
    "also,",
    "rather",
    "wait,",
    "stop,",
    "not what i",
];

/// Words in user prose that usually state a constraint or preference.
const CONSTRAINT_WORDS: [&str; 11] = [
    "must",
    "should",
    "don't",
    "do not",
    "never",
    "always",
    "prefer",
    "avoid",
    "make sure",
    "without",
    "instead of",
];

/// Fewest words a quotable sentence has.
const MIN_WORDS: usize = 3;
/// Least share of letters and spaces among a quotable line's characters.
const MIN_LETTER_SHARE: f64 = 0.7;
/// Least share of natural-language words among a quotable line's words.
const MIN_WORD_SHARE: f64 = 0.6;

/// The prose lines of `text`: outside code fences and pasted shell sessions, and each
/// [`is_prose_line`].
pub(super) fn prose_lines(text: &str) -> Vec<&str> {
    let mut in_fence = false;
    let mut in_shell_output = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            in_shell_output = false;
            continue;
        }
        if in_fence {
            continue;
        }
        if trimmed == "$" || trimmed.starts_with("$ ") {
            in_shell_output = true;
            continue;
        }
        // A pasted command's output runs to a blank line or to a line that reads as a sentence.
        if in_shell_output {
            if trimmed.is_empty() || reads_as_sentence(trimmed) {
                in_shell_output = false;
            } else {
                continue;
            }
        }
        if is_prose_line(trimmed) {
            out.push(strip_list_marker(trimmed));
        }
    }
    out
}

/// Capitalized, ending like a sentence, several words: not command output.
fn reads_as_sentence(line: &str) -> bool {
    line.starts_with(|c: char| c.is_uppercase())
        && line.ends_with(['.', '?', '!'])
        && line.split_whitespace().count() >= MIN_WORDS
}

/// The sentences of the prose lines of `text`, each itself quotable.
pub(super) fn prose_sentences(text: &str) -> Vec<String> {
    prose_lines(text)
        .into_iter()
        .flat_map(split_sentences)
        .filter(|s| is_prose_line(s))
        .collect()
}

/// Whether a (trimmed) line reads as a statement rather than structure, code or output.
pub(super) fn is_prose_line(line: &str) -> bool {
    let line = line.trim();
    if line.is_empty()
        || line.starts_with('#')
        || line.ends_with(':')
        || line.starts_with(['$', '>', '%', '|', '{', '}', '[', '<', '/', '\\', '`'])
        || line.starts_with("→ ")
        || line.starts_with("[compressed]")
    {
        return false;
    }
    let bare = strip_list_marker(line);
    if bare.ends_with(':') || bare.starts_with(['#', '$', '`']) || is_numbered_listing(bare) {
        return false;
    }
    let words = bare.split_whitespace().count();
    if words < MIN_WORDS {
        return false;
    }
    // Paths, listings, diffs and log lines are mostly punctuation, digits and long tokens.
    let total = bare.chars().count();
    let letters = bare
        .chars()
        .filter(|c| c.is_alphabetic() || *c == ' ' || *c == '\'' || *c == ',')
        .count();
    let pathy = bare
        .split_whitespace()
        .filter(|w| w.contains('/') || w.contains('\\') || w.contains("::"))
        .count();
    let wordlike = bare.split_whitespace().filter(|w| is_word(w)).count();
    (letters as f64) >= MIN_LETTER_SHARE * total as f64
        && (wordlike as f64) >= MIN_WORD_SHARE * words as f64
        && pathy * 3 < words
}

/// A natural-language word: letters (with apostrophes or hyphens inside), perhaps wrapped in
/// punctuation.
fn is_word(token: &str) -> bool {
    let core = token.trim_matches(|c: char| !c.is_alphanumeric());
    let mut chars = core.chars();
    chars.next().is_some_and(char::is_alphabetic)
        && chars.all(|c| c.is_alphabetic() || c == '\'' || c == '-' || c == '’')
}

/// A line of a file shown with line numbers (`283: let x = 1;`).
fn is_numbered_listing(line: &str) -> bool {
    line.split_once(':')
        .is_some_and(|(number, _)| !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()))
}

/// `line` without a leading bullet, number or bold markers.
fn strip_list_marker(line: &str) -> &str {
    let mut rest = line.trim_start();
    if let Some(r) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("* ")) {
        rest = r;
    } else if let Some((number, r)) = rest.split_once(". ")
        && !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit())
    {
        rest = r;
    }
    rest.trim_start_matches("**").trim_start()
}

/// Sentences end at `.`, `?` or `!` followed by a space (so `lib.rs` and `1.5` stay whole).
fn split_sentences(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let ends =
            matches!(b, b'.' | b'?' | b'!') && bytes.get(i + 1).is_none_or(|next| *next == b' ');
        if ends {
            out.push(line[start..=i].trim().to_string());
            start = i + 1;
        }
    }
    if start < line.len() {
        out.push(line[start..].trim().to_string());
    }
    out.retain(|s| !s.is_empty());
    out
}

fn contains_any(text: &str, phrases: &[&str]) -> bool {
    let lower = text.to_lowercase();
    phrases.iter().any(|p| lower.contains(p))
}

/// Whether an assistant sentence states a choice.
pub(super) fn states_decision(sentence: &str) -> bool {
    contains_any(sentence, &DECISION_PHRASES)
}

/// Whether an assistant sentence states what it will do next.
pub(super) fn states_intent(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    INTENT_OPENINGS.iter().any(|o| lower.starts_with(o))
}

/// Whether a user message redirects the work.
pub(super) fn is_correction(text: &str) -> bool {
    let lower = text.to_lowercase();
    CORRECTION_MARKERS
        .iter()
        .any(|m| lower.starts_with(m) || lower.contains(&format!(" {m}")))
}

/// Whether a user sentence states a constraint or preference.
pub(super) fn states_constraint(sentence: &str) -> bool {
    contains_any(sentence, &CONSTRAINT_WORDS)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn structure_code_and_output_are_not_prose() {
        for line in [
            "## Root Cause Analysis",
            "The fix is:",
            "- The fix is:",
            "$ ls -la",
            "src/lib.rs src/main.rs tests/all.rs",
            "| a | b |",
            "drwxr-xr-x 2 root root 4096 .",
            "**Done**",
            "283: raise an error when the data must be present",
            "ok",
        ] {
            assert!(!is_prose_line(line), "{line}");
        }
        assert!(is_prose_line(
            "I'll use the streaming decoder for big files."
        ));
        assert!(is_prose_line(
            "- Keep the API stable, callers depend on it."
        ));
    }

    #[test]
    fn fenced_code_is_skipped_and_sentences_split_at_spaces() {
        let text = "Read lib.rs first. Then test.\n```\nlet x = 1; because\n```\nDone now, really.";
        let sentences = prose_sentences(text);
        assert_eq!(sentences, vec!["Read lib.rs first.", "Done now, really."]);
        let pasted = "Here is what I see\n$ ls\nCargo.toml  src  tests\nPlease add a README.";
        assert_eq!(
            prose_lines(pasted),
            vec!["Here is what I see", "Please add a README."]
        );
    }

    #[test]
    fn choices_intents_and_corrections_are_recognized() {
        assert!(states_decision("Let's go with the batch writer."));
        assert!(!states_decision("The tests pass."));
        assert!(states_intent("Next, I will update the changelog."));
        assert!(!states_intent("The changelog was updated."));
        assert!(is_correction("Actually, make it JSON."));
        assert!(is_correction("No, keep the old name."));
        assert!(!is_correction("Looks good so far."));
    }
}
