//! Seen names: the error types (`ValueError`, `DOMException`) and test names
//! (`test_empty_header`) in a text, wherever it came from — a file read, tool output, a user
//! message, the agent's prose. Names only, no claim attached.

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// What a seen name ([`seen_names`]) holds: an error type ends with `Error` or `Exception`, a
/// test name starts with `test_`.
static SEEN_NEEDLES: LazyLock<[Finder<'static>; 3]> =
    LazyLock::new(|| ["Error", "Exception", "test_"].map(|needle| Finder::new(needle.as_bytes())));

/// Whether `b` is a byte of an identifier ([`identifiers`]).
fn is_identifier_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The identifiers of `text`: maximal runs of ASCII letters, digits and `_`.
pub(super) fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// Whether an identifier is a seen name: an error type (`ValueError`, `DOMException`) or a
/// test name (`test_empty_header`).
fn is_seen_name(word: &str) -> bool {
    let error = word.starts_with(|c: char| c.is_ascii_uppercase())
        && ["Error", "Exception"]
            .iter()
            .any(|s| word.len() > s.len() && word.ends_with(s));
    let test = word.len() > "test_".len() && word.starts_with("test_");
    error || test
}

/// Error types (`ValueError`, `DOMException`) and test names (`test_empty_header`) in `text`,
/// first ones first: names an engineer searches for, wherever they were seen.
///
/// Only the identifiers that hold `Error`, `Exception` or `test_` can be one: they are found
/// by a vectorized search and grown to their whole identifier, so the rest of the text (every
/// file read, most of every output) is never split into words.
pub(super) fn seen_names(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    // Where each needle occurs, in the order of the text.
    let mut needles: Vec<(usize, usize)> = SEEN_NEEDLES
        .iter()
        .flat_map(|finder| {
            let len = finder.needle().len();
            finder.find_iter(bytes).map(move |at| (at, at + len))
        })
        .collect();
    needles.sort_unstable();
    let mut found: Vec<&str> = Vec::new();
    // The end of the identifier last looked at: its other needles are skipped.
    let mut looked_to = 0;
    for (needle_start, needle_end) in needles {
        if needle_start < looked_to {
            continue;
        }
        let start = bytes[..needle_start]
            .iter()
            .rposition(|&b| !is_identifier_byte(b))
            .map_or(0, |i| i + 1);
        let end = bytes[needle_end..]
            .iter()
            .position(|&b| !is_identifier_byte(b))
            .map_or(bytes.len(), |i| needle_end + i);
        looked_to = end;
        // Identifier bytes are ASCII: both ends are character boundaries.
        let word = &text[start..end];
        if is_seen_name(word) && !found.contains(&word) {
            found.push(word);
        }
    }
    found
}

/// [`seen_names`], every identifier of `text` looked at.
#[cfg(test)]
fn seen_names_word_by_word(text: &str) -> Vec<&str> {
    let mut found: Vec<&str> = Vec::new();
    for word in identifiers(text).filter(|w| is_seen_name(w)) {
        if !found.contains(&word) {
            found.push(word);
        }
    }
    found
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seen_names_are_error_types_and_test_names() {
        assert_eq!(
            seen_names(
                "raise ValueError(x) # test_a; DOMException; Error; mytest_b; isError; test_a"
            ),
            ["ValueError", "test_a", "DOMException"]
        );
    }

    proptest! {
        #[test]
        fn growing_the_needles_finds_what_every_identifier_gives(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("Error"), Just("ValueError"), Just("Exception"), Just("test_"),
                    Just("test"), Just("_"), Just("a"), Just("Z"), Just("9"), Just("é"),
                    Just(" "), Just("."), Just("\n"), Just("rror"), Just("E"),
                ],
                0..40,
            )
        ) {
            let text = parts.concat();
            prop_assert_eq!(seen_names(&text), seen_names_word_by_word(&text));
        }
    }
}
