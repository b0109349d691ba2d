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
//! its end marker.

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

/// Where a private key block opens (the redaction's pattern for it spans lines).
const KEY_BLOCK_START: &str = "-----BEGIN";

/// The streamed text of one model call, printed as safely as it can be as it arrives.
#[derive(Debug, Default)]
pub(super) struct StreamedText {
    /// The text since the last line printed whole.
    region: String,
    /// What of the region's redaction has been printed.
    printed: String,
}

impl StreamedText {
    /// Take a delta; returns what may be printed now (redacted and escaped).
    pub(super) fn push(&mut self, delta: &str) -> String {
        self.region.push_str(delta);
        let mut out = String::new();
        // Whole lines go out whole, unless a private key block is still open in them.
        while let Some(end) = self.closed_lines() {
            let rest = self.region.split_off(end);
            out.push_str(&self.finish_region());
            self.region = rest;
        }
        if self.region.len() > LONGEST_HELD
            && let Some(cut) = self.region.rfind(char::is_whitespace)
        {
            let cut = cut + self.region[cut..].chars().next().map_or(1, char::len_utf8);
            let rest = self.region.split_off(cut);
            out.push_str(&self.finish_region());
            self.region = rest;
        }
        if open_key_block(&self.region).is_none() {
            let redacted = redact_value(&self.region);
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
        let out = self.finish_region();
        self.region.clear();
        out
    }

    /// The end of the region's last line break before any open key block.
    fn closed_lines(&self) -> Option<usize> {
        let open = open_key_block(&self.region).unwrap_or(self.region.len());
        Some(self.region[..open].rfind('\n')? + 1)
    }

    /// Print the region's redaction whole, and start a new region.
    fn finish_region(&mut self) -> String {
        let redacted = redact_value(&self.region);
        let out = self.print_from(&redacted);
        self.printed.clear();
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

/// Where in `text` a private key block starts that has no end marker yet.
fn open_key_block(text: &str) -> Option<usize> {
    let start = text.rfind(KEY_BLOCK_START)?;
    (!text[start + KEY_BLOCK_START.len()..].contains("-----END")).then_some(start)
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
