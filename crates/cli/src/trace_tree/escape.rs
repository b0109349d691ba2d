//! Making text from a trace file safe to print: a span name or attribute value is data, and an
//! escape sequence in it must not drive the terminal (recolour, retitle, clear the screen) or a
//! newline in it break the tree's layout.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as is: control characters (C0, DEL, C1) and the
/// bidirectional overrides and isolates that reorder what follows them.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every control character written as its Rust escape (`\n`, `\t`, `\u{1b}`, …);
/// borrowed when there is none (the usual case).
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                _ => out.extend(c.escape_unicode()),
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::escape_control;

    #[test]
    fn control_characters_are_written_as_escapes() {
        assert_eq!(escape_control("plain · text"), "plain · text");
        assert_eq!(
            escape_control("\x1b[31mred\x1b[0m"),
            "\\u{1b}[31mred\\u{1b}[0m"
        );
        assert_eq!(escape_control("a\nb\tc\rd\u{7f}"), "a\\nb\\tc\\rd\\u{7f}");
        assert_eq!(
            escape_control("\u{9b}2J \u{202e}abc"),
            "\\u{9b}2J \\u{202e}abc"
        );
    }
}
