//! Names an agent writes in its own messages: backticked identifiers (`Theme.fg`,
//! `parse_header()`, `UserMessageList`). Quoted as written, so a name an engineer searches for
//! afterwards is still in the conversation once the message that said it is summarized. File
//! paths in prose are `paths.rs`'s.

/// At most this many names are taken from one message.
pub(super) const NAMES_PER_MESSAGE: usize = 24;

use super::paths::{Where, path_in};

/// The names in an assistant message's `text`, first ones first.
pub(super) fn names_in_prose(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut push = |name: String| {
        if found.len() < NAMES_PER_MESSAGE && !found.contains(&name) {
            found.push(name);
        }
    };
    // Backticked spans, outside fenced code blocks (code is not a name the agent chose).
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Odd pieces are inside backticks when a closing backtick follows.
        let pieces: Vec<&str> = line.split('`').collect();
        for (i, inside) in pieces.iter().enumerate() {
            if i % 2 == 1
                && i + 1 < pieces.len()
                && let Some(name) = code_name(inside)
            {
                push(name);
            }
        }
    }
    found
}

/// A backticked span that names code: an identifier with a separator or mixed case, or a call
/// (`render()`); plain words (`red`, `auto`) are not names, and paths are paths.
fn code_name(span: &str) -> Option<String> {
    let span = span.trim();
    if span.len() < 3
        || span.len() > 80
        || span.contains(char::is_whitespace)
        || path_in(span, Where::Prose).is_some()
    {
        return None;
    }
    let bare = span.strip_suffix("()").unwrap_or(span);
    let identifier = bare
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '$'))
        && bare
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !identifier {
        return None;
    }
    let called = bare.len() < span.len();
    let separated = bare.contains(['_', '.', ':']);
    let mixed_case = bare.chars().any(|c| c.is_ascii_uppercase())
        && bare.chars().any(|c| c.is_ascii_lowercase());
    (called || separated || mixed_case).then(|| bare.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn backticked_code_names_are_names_and_plain_words_and_paths_are_not() {
        let text = "I changed `Theme.fg` and `parse_header()` in packages/tui/src/tui.ts, \
                    see `settings.json`; the color is `red` and `auto`. Also `UserMessageList`.\n\
                    ```\nlet `inside_fence` = 1;\n```\nVisit https://example.com/a.js";
        assert_eq!(
            names_in_prose(text),
            ["Theme.fg", "parse_header", "UserMessageList",]
        );
    }
}
