//! Text from a model or a tool on its way to the terminal: redacted and escaped.
//!
//! A model's answer, a tool's name, an error quoting a provider or an MCP server are data: a
//! credential in them is replaced by the redaction every troupe output uses
//! ([`redact_value`]), and a control character (an escape sequence that would recolour,
//! retitle or clear the terminal, a carriage return that would overwrite the line) is written
//! as its escape by the trace viewer's own function ([`escape_control`]) — only line breaks and
//! tabs stay what they are.
//!
//! Streamed text ([`StreamedText`]) is redacted as a whole line at a time, so a secret split
//! across deltas is still seen whole: a line is printed up to its last whitespace as it grows
//! (the word being generated is held back until it ends), and a private key block is held until
//! its end marker. The work is linear in the text: each delta's bytes are scanned once for line
//! breaks, whitespace and key markers, and the held line is redacted again only when a delta
//! brings whitespace — the only thing that lets more of it be printed — so a long word without
//! any is redacted once, when it ends, not at every delta.

use troupe::telemetry::redact::redact_value;
use troupe_cli::trace_tree::escape_control;

/// `text` redacted and escaped for the terminal (line breaks and tabs kept).
pub(super) fn safe(text: &str) -> String {
    escape_keeping_layout(&redact_value(text))
}

/// `text` with its control characters escaped, except line breaks and tabs.
fn escape_keeping_layout(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for piece in text.split_inclusive(['\n', '\t']) {
        let (body, end) = match piece.chars().last() {
            Some(c @ ('\n' | '\t')) => (&piece[..piece.len() - 1], Some(c)),
            _ => (piece, None),
        };
        out.push_str(&escape_control(body));
        out.extend(end);
    }
    out
}

/// A line that grows this long without a line break is cut at a word boundary (redacting the
/// whole of a very long line at every delta would cost its length squared).
const LONGEST_HELD: usize = 8 * 1024;

/// Where a private key block opens (the redaction's pattern for it spans lines)…
const KEY_BLOCK_START: &str = "-----BEGIN";
/// …and where it ends.
const KEY_BLOCK_END: &str = "-----END";

/// The streamed text of one model call, printed as safely as it can be as it arrives.
#[derive(Debug, Default)]
pub(super) struct StreamedText {
    /// The text since the last line printed whole.
    region: String,
    /// What of the region's redaction has been printed.
    printed: String,
    /// Where in the region a private key block opens that has no end marker yet.
    key_open: Option<usize>,
    /// The end of the region's last line break before `key_open` (before its end when none).
    closed: Option<usize>,
    /// The end of the region's last line break (inside an open key block too).
    last_break: Option<usize>,
    /// The end of the region's last whitespace character.
    last_space: Option<usize>,
    /// Whitespace came since the region was last redacted: more of it may be printable.
    spaced: bool,
    /// Bytes given to the redaction so far: the work streaming costs (tests bound it).
    #[cfg_attr(not(test), allow(dead_code))]
    redacted: usize,
}

impl StreamedText {
    /// Take a delta; returns what may be printed now (redacted and escaped).
    pub(super) fn push(&mut self, delta: &str) -> String {
        let scanned = self.region.len();
        self.region.push_str(delta);
        self.scan(scanned);
        let mut out = String::new();
        // Whole lines go out whole, unless a private key block is still open in them.
        if let Some(end) = self.closed {
            out.push_str(&self.finish_region_at(end));
        }
        if self.region.len() > LONGEST_HELD
            && let Some(cut) = self.last_space
        {
            out.push_str(&self.finish_region_at(cut));
        }
        if self.key_open.is_none() && self.spaced {
            self.spaced = false;
            let redacted = self.redact();
            // Up to the last whitespace: the word after it may still be growing into a secret.
            let safe_end = redacted
                .char_indices()
                .rfind(|(_, c)| c.is_whitespace())
                .map_or(0, |(i, c)| i + c.len_utf8());
            out.push_str(&self.print_from(&redacted[..safe_end]));
        }
        out
    }

    /// The rest, once the model call ended.
    pub(super) fn finish(&mut self) -> String {
        let out = self.finish_region_at(self.region.len());
        *self = StreamedText {
            redacted: self.redacted,
            ..StreamedText::default()
        };
        out
    }

    /// Note the line breaks, whitespace and key markers of the region's bytes from `from` on
    /// (each byte is scanned once: the markers are found by where they end).
    fn scan(&mut self, from: usize) {
        for (i, c) in self.region[from..].char_indices() {
            let end = from + i + c.len_utf8();
            let ends_with = |marker: &str| self.region[..end].ends_with(marker);
            if c == 'N' && ends_with(KEY_BLOCK_START) {
                self.key_open = Some(end - KEY_BLOCK_START.len());
            } else if c == 'D'
                && ends_with(KEY_BLOCK_END)
                && self
                    .key_open
                    .is_some_and(|open| end - KEY_BLOCK_END.len() >= open + KEY_BLOCK_START.len())
            {
                self.key_open = None;
                self.closed = self.last_break;
            }
            if c == '\n' {
                self.last_break = Some(end);
                if self.key_open.is_none() {
                    self.closed = Some(end);
                }
            }
            if c.is_whitespace() {
                self.last_space = Some(end);
                self.spaced = true;
            }
        }
    }

    /// The region's redaction, counted.
    fn redact(&mut self) -> String {
        self.redacted += self.region.len();
        redact_value(&self.region)
    }

    /// Print the redaction of the region up to `end` whole, and start a new region with the
    /// rest (its positions moved with it).
    fn finish_region_at(&mut self, end: usize) -> String {
        let rest = self.region.split_off(end);
        let redacted = self.redact();
        let out = self.print_from(&redacted);
        self.printed.clear();
        self.region = rest;
        let moved = |at: Option<usize>| at.and_then(|at| at.checked_sub(end)).filter(|at| *at > 0);
        self.key_open = self.key_open.and_then(|at| at.checked_sub(end));
        self.last_break = moved(self.last_break);
        self.last_space = moved(self.last_space);
        self.closed = if self.key_open.is_some() {
            None
        } else {
            self.last_break
        };
        self.spaced = self.last_space.is_some();
        out
    }

    /// What of `redacted` (the region's redaction now, or a prefix of it) is not yet printed.
    /// When the redaction changed a part already printed (a scheme word before the token that
    /// turned out to follow it), the new text goes on from where the two agree: every byte
    /// printed comes from a redaction of everything before it, so a secret is never printed,
    /// though a word may show twice.
    fn print_from(&mut self, redacted: &str) -> String {
        let agreed = common_prefix(&self.printed, redacted);
        if agreed == self.printed.len() && redacted.len() <= agreed {
            return String::new();
        }
        let new = &redacted[agreed.min(redacted.len())..];
        if agreed < self.printed.len() {
            self.printed.truncate(agreed);
        }
        self.printed.push_str(new);
        escape_keeping_layout(new)
    }
}

/// The length of the longest common prefix of `a` and `b`, at a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn streamed(deltas: &[&str]) -> (Vec<String>, String) {
        let mut text = StreamedText::default();
        let mut pieces: Vec<String> = deltas.iter().map(|d| text.push(d)).collect();
        pieces.push(text.finish());
        let all = pieces.concat();
        (pieces, all)
    }

    #[test]
    fn control_characters_are_escaped_but_lines_and_tabs_stay() {
        assert_eq!(
            safe("a\x1b[2Jb\n\tc\rd\u{9b}"),
            "a\\u{1b}[2Jb\n\tc\\rd\\u{9b}"
        );
    }

    #[test]
    fn words_print_as_they_end_and_a_split_secret_is_redacted_whole() {
        let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789";
        let (pieces, all) = streamed(&["Your key is ", &key[..10], &key[10..], " ok\n"]);
        assert_eq!(pieces[0], "Your key is ");
        assert!(!all.contains("abcdefghij"), "{all}");
        assert!(all.contains("[redacted]"), "{all}");
        assert!(all.ends_with(" ok\n"), "{all}");
    }

    #[test]
    fn an_escape_sequence_split_across_deltas_is_escaped() {
        let (_, all) = streamed(&["red: \x1b", "[31m", "x\n"]);
        assert_eq!(all, "red: \\u{1b}[31mx\n");
    }

    #[test]
    fn a_private_key_block_is_held_until_its_end() {
        let (pieces, all) = streamed(&[
            "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\n",
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n",
            "-----END OPENSSH PRIVATE KEY-----\nbye\n",
        ]);
        assert_eq!(pieces[0], "key:\n");
        assert_eq!(pieces[1], "");
        assert!(!all.contains("b3BlbnNzaC1rZX"), "{all}");
        assert!(all.ends_with("bye\n"), "{all}");
    }

    /// The chat's redaction of a streamed word is linear in its length (#52: a long word
    /// without whitespace was redacted again from its start at every delta, 4× the word
    /// costing 16× the time): the bytes given to the redaction are counted, not timed.
    #[test]
    fn a_long_word_streamed_in_small_deltas_is_redacted_a_bounded_number_of_times() {
        for (word, deltas) in [(64 * 1024, 4), (200 * 1024, 7)] {
            let mut text = StreamedText::default();
            let long = "x".repeat(word);
            let mut all = String::from("the word: ");
            all.push_str(&text.push("the word: "));
            for piece in long.as_bytes().chunks(deltas) {
                all.push_str(&text.push(std::str::from_utf8(piece).unwrap()));
            }
            all.push_str(&text.push(" and then some more words\n"));
            all.push_str(&text.finish());
            assert!(all.ends_with(&format!("{long} and then some more words\n")));
            let streamed = 10 + word + 26;
            assert!(
                text.redacted <= 3 * streamed,
                "{} bytes redacted for {streamed} streamed",
                text.redacted
            );
        }
    }

    /// Wherever the deltas are cut, a secret is never printed and text without one prints as
    /// it would whole.
    #[test]
    fn any_cut_of_the_deltas_prints_no_secret_and_plain_text_as_it_is() {
        let secret = "abcdefghijklmnopqrstuvwxyz0123456789";
        let key = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ";
        let with_secrets = [
            format!("Your key is sk-proj-{secret} ok\nnext line\n"),
            format!("Authorization: Bearer {secret} done\n"),
            format!(
                "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\n{key}\n\
                 -----END OPENSSH PRIVATE KEY-----\nbye now\n"
            ),
        ];
        let plain = "a plain line\nand another   with  spaces\tand tabs\n\
                     -----BEGIN nothing -----END\nwordswithoutanyspace";
        let cuts = |text: &str| -> Vec<Vec<String>> {
            let mut all: Vec<Vec<String>> = (1..=7)
                .map(|n| {
                    let chars: Vec<char> = text.chars().collect();
                    chars.chunks(n).map(|c| c.iter().collect()).collect()
                })
                .collect();
            for (at, _) in text.char_indices() {
                all.push(vec![text[..at].to_string(), text[at..].to_string()]);
            }
            all
        };
        for text in &with_secrets {
            for deltas in cuts(text) {
                let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
                let (_, all) = streamed(&deltas);
                assert!(!all.contains("abcdefghijklmnop"), "{deltas:?}: {all}");
                assert!(!all.contains("b3BlbnNzaC1rZX"), "{deltas:?}: {all}");
                assert!(all.contains("[redacted]"), "{deltas:?}: {all}");
            }
        }
        for deltas in cuts(plain) {
            let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
            assert_eq!(streamed(&deltas).1, safe(plain), "{deltas:?}");
        }
    }

    #[test]
    fn a_word_already_printed_is_never_unsafe_to_have_printed() {
        let (_, all) = streamed(&[
            "Authorization: Bearer ",
            "abcdefghijklmnop",
            "qrstuvwxyz12345 done",
        ]);
        assert!(!all.contains("abcdefghijklmnopqrstuvwxyz12345"), "{all}");
    }
}
