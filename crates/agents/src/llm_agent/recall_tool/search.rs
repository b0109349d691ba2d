//! Searching the archive: which archived messages contain the query's words, best first.

use std::fmt::Write as _;

use troupe_protocol::StoredMessage;

use super::{MAX_HITS, RECALL_TOOL, Recall, SNIPPET_CONTEXT_CHARS, rendered};

impl Recall {
    /// The archived messages that contain the most of `words`, best first.
    pub(super) fn search(&self, query: &str, words: &[String]) -> String {
        let phrase = words.join(" ");
        let mut hits: Vec<Hit<'_>> = self
            .originals()
            .into_iter()
            .filter_map(|original| {
                let mut text = rendered(original);
                if let Some(tool) = self.tool_of(original) {
                    let _ = write!(text, "\n(tool {tool})");
                }
                let lower = text.to_ascii_lowercase();
                let matched: Vec<&String> = words
                    .iter()
                    .filter(|w| lower.contains(w.as_str()))
                    .collect();
                if matched.is_empty() {
                    return None;
                }
                let at_phrase = (words.len() > 1)
                    .then(|| lower.find(phrase.as_str()))
                    .flatten();
                let (at, len) = match at_phrase {
                    Some(at) => (at, phrase.len()),
                    None => {
                        let longest = matched.iter().max_by_key(|w| w.len())?;
                        (lower.find(longest.as_str())?, longest.len())
                    }
                };
                Some(Hit {
                    original,
                    words: matched.len(),
                    phrase: at_phrase.is_some(),
                    snippet: snippet(&text, at, len),
                })
            })
            .collect();
        if hits.is_empty() {
            return format!(
                "nothing archived matches \"{query}\" ({}); try other words",
                self.holdings()
            );
        }
        // Most words first, a match of the whole query next, newest first among equals.
        hits.sort_by(|a, b| {
            (b.words, b.phrase, b.original.id).cmp(&(a.words, a.phrase, a.original.id))
        });
        let total = hits.len();
        let mut out = if total > MAX_HITS {
            format!(
                "\"{query}\": {total} archived messages match; the best {MAX_HITS}, best first \
                 (add words to narrow):\n"
            )
        } else {
            format!(
                "\"{query}\": {total} archived message{} match{}, best first:\n",
                if total == 1 { "" } else { "s" },
                if total == 1 { "es" } else { "" }
            )
        };
        for hit in hits.iter().take(MAX_HITS) {
            let _ = writeln!(
                out,
                "- {}, {}: {}",
                hit.original.id,
                self.describe(hit.original),
                hit.snippet
            );
        }
        let _ = write!(
            out,
            "Read one whole with {RECALL_TOOL} {{\"id\": \"{}\"}}.",
            hits[0].original.id
        );
        out
    }
}

/// One search hit.
struct Hit<'a> {
    original: &'a StoredMessage,
    /// How many query words it contains.
    words: usize,
    /// Whether it contains the whole query.
    phrase: bool,
    snippet: String,
}

/// The text around `text[at..at + len]`, on one line, `…` where it was cut.
fn snippet(text: &str, at: usize, len: usize) -> String {
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(SNIPPET_CONTEXT_CHARS.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    let after = at + len;
    let end = text[after..]
        .char_indices()
        .nth(SNIPPET_CONTEXT_CHARS)
        .map_or(text.len(), |(i, _)| after + i);
    let one_line = text[start..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&one_line);
    if end < text.len() {
        out.push('…');
    }
    out
}
