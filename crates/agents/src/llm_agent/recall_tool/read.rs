//! Reading one id back: the original (or the list a replacement stands for), a page at a time.

use std::fmt::Write as _;

use troupe_protocol::{MessageId, StoredMessage};
use troupe_tokens::TokenCounter;

use super::{FIRST_LINE_CHARS, RECALL_TOOL, Recall, clip, rendered};

impl Recall {
    /// Page `page` of the original `id`, or of the list of originals a replacement `id` (live
    /// or itself archived) stands for.
    pub(super) fn read(&self, id: MessageId, page: usize) -> Result<String, String> {
        let replaced = self.archive.replaced_by(id);
        let (title, body) = match self.archive.original(id) {
            Some(original) => {
                let mut body = rendered(original);
                if !replaced.is_empty() {
                    let _ = write!(body, "\n\n{id} replaced:\n{}", self.listing(&replaced));
                }
                (format!("{id}, {}", self.describe(original)), body)
            }
            None if !replaced.is_empty() => (
                format!(
                    "{id} is in your conversation; it stands for {} archived messages",
                    replaced.len()
                ),
                self.listing(&replaced),
            ),
            None => {
                return Err(format!(
                    "{id} is not archived: {RECALL_TOOL} takes an id as a stub or summary names \
                     it on its last line (\"[replaces m3..m5, m9]\" names m3, m4, m5 and m9); \
                     {}; messages still in your conversation are not archived",
                    self.holdings()
                ));
            }
        };
        let pages = pages(&body, self.page_tokens, self.counter.as_ref());
        let count = pages.len();
        let Some(text) = pages.get(page - 1) else {
            return Err(format!(
                "{id} has {count} page{}: ask for page 1 to {count}",
                if count == 1 { "" } else { "s" }
            ));
        };
        // The footer also keeps the answer's last line from ever being an original's own
        // `[replaces …]` marker, which would make the answer look like a replacement.
        let (head, foot) = if count == 1 {
            (format!("{title}:"), format!("[end of {id}]"))
        } else if page < count {
            (
                format!("{title}, page {page} of {count}:"),
                format!(
                    "[page {page} of {count}: recall {{\"id\": \"{id}\", \"page\": {}}} for more]",
                    page + 1
                ),
            )
        } else {
            (
                format!("{title}, page {page} of {count}:"),
                format!("[page {page} of {count}: the end of {id}]"),
            )
        };
        Ok(format!("{head}\n{}\n{foot}", text.trim_end_matches('\n')))
    }

    /// `m3, user: first line` for each message, one per line.
    fn listing(&self, messages: &[&StoredMessage]) -> String {
        let mut out = String::new();
        for m in messages {
            let body = rendered(m);
            let first = body.lines().map(str::trim).find(|l| !l.is_empty());
            let _ = writeln!(
                out,
                "- {}, {}: {}",
                m.id,
                self.describe(m),
                clip(first.unwrap_or("(empty)"), FIRST_LINE_CHARS)
            );
        }
        out
    }
}

/// `text` cut into pages of at most `budget` tokens each (by `counter`), at line ends where a
/// line fits, inside a line where one does not. The pages, concatenated, are `text`.
pub(super) fn pages<'a>(text: &'a str, budget: usize, counter: &dyn TokenCounter) -> Vec<&'a str> {
    let budget = budget.max(1);
    let mut pages = Vec::new();
    let mut start = 0;
    let mut tokens = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let line_tokens = counter.count(line);
        if line_tokens > budget {
            if at > start {
                pages.push(&text[start..at]);
            }
            let mut rest = line;
            while !rest.is_empty() {
                let cut = longest_prefix_within(rest, budget, counter);
                pages.push(&rest[..cut]);
                rest = &rest[cut..];
            }
            at += line.len();
            start = at;
            tokens = 0;
            continue;
        }
        if tokens + line_tokens > budget && at > start {
            pages.push(&text[start..at]);
            start = at;
            tokens = 0;
        }
        tokens += line_tokens;
        at += line.len();
    }
    if at > start || pages.is_empty() {
        pages.push(&text[start..at]);
    }
    pages
}

/// The byte length of the longest prefix of `text` (at a char boundary, at least one char)
/// within `budget` tokens. The prefix length doubles until it is over the budget, then a
/// binary search between the last two: every count is of at most about twice the answer, so a
/// megabyte on one line costs a few counts per page, not a count of the megabyte.
fn longest_prefix_within(text: &str, budget: usize, counter: &dyn TokenCounter) -> usize {
    let fits = |end: usize| counter.count(&text[..end]) <= budget;
    let first = text.chars().next().map_or(text.len(), char::len_utf8);
    let mut lo = first;
    let mut hi = floor_boundary(text, budget.saturating_mul(2).max(first));
    // Grow `hi` until the prefix no longer fits (or is the whole text).
    while hi > lo && fits(hi) {
        lo = hi;
        if hi == text.len() {
            return hi;
        }
        hi = floor_boundary(text, hi.saturating_mul(2));
    }
    // Now `lo` fits (or is the one char a page must show) and `hi` does not.
    loop {
        if hi <= lo {
            return lo;
        }
        let mut mid = floor_boundary(text, lo + (hi - lo) / 2);
        if mid <= lo {
            mid = next_boundary(text, lo);
        }
        if mid >= hi {
            return lo;
        }
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
}

/// The largest char boundary of `text` at or below `at` (the text's end when past it).
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest char boundary of `text` above `at` (`at` must be below the end).
fn next_boundary(text: &str, at: usize) -> usize {
    let mut next = at + 1;
    while !text.is_char_boundary(next) {
        next += 1;
    }
    next
}
