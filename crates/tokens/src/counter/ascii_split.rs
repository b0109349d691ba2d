//! tiktoken's o200k_base split of ASCII text, by hand: the same pieces as its pattern, with no
//! regex at all (most tool output and code is ASCII, and a stub is). In a text that is not all
//! ASCII a piece is split here when the ASCII before the next other character decides it, and
//! by the regex otherwise (`o200k.rs`).
//!
//! In ASCII the pattern's classes are small: a letter is `A-Z` or `a-z` (no titlecase,
//! modifier, other letter or mark), a number `0-9`, whitespace `\t \n \v \f \r` and the space.
//! Its alternatives, tried in order at the start of each piece, as a backtracking engine tries
//! them:
//!
//! 1. an optional character that is not a line break, letter or number, then capitals, then
//!    at least one lowercase letter, then an optional contraction (`'s 't 're 've 'm 'll 'd`,
//!    any case);
//! 2. the same with at least one capital and any lowercase letters;
//! 3. one to three digits;
//! 4. an optional space, then symbols (not whitespace, letter or number), then line breaks and
//!    slashes;
//! 5. whitespace up to its last line break;
//! 6. whitespace not followed by a non-space (a run followed by a word keeps its last
//!    character for the word), else 7. whitespace.

use std::cell::Cell;

/// Whitespace as the pattern's `\s` has it in ASCII.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

fn is_line_break(b: u8) -> bool {
    matches!(b, b'\r' | b'\n')
}

/// `[^\r\n\p{L}\p{N}]`: what may come before a word.
fn is_prefix(b: u8) -> bool {
    !is_line_break(b) && !b.is_ascii_alphanumeric()
}

/// `[^\s\p{L}\p{N}]`: a symbol.
fn is_symbol(b: u8) -> bool {
    !is_space(b) && !b.is_ascii_alphanumeric()
}

/// ASCII bytes that may stop short of the text: whether a decision needed a byte past them
/// (then the character there, not ASCII, might have changed it).
struct Ascii<'a> {
    bytes: &'a [u8],
    past_end: Cell<bool>,
}

impl Ascii<'_> {
    fn get(&self, at: usize) -> Option<u8> {
        let byte = self.bytes.get(at).copied();
        if byte.is_none() {
            self.past_end.set(true);
        }
        byte
    }

    /// Where the run of bytes passing `class` from `at` ends.
    fn run(&self, at: usize, class: impl Fn(u8) -> bool) -> usize {
        let mut end = at;
        while self.get(end).is_some_and(&class) {
            end += 1;
        }
        end
    }

    /// The end of an optional contraction at `at`: `'` and the first of `s t re ve m ll d`
    /// that follows, in any case.
    fn contraction(&self, at: usize) -> usize {
        if self.get(at) != Some(b'\'') {
            return at;
        }
        for ending in ["s", "t", "re", "ve", "m", "ll", "d"] {
            let matches = ending.bytes().enumerate().all(|(i, e)| {
                self.get(at + 1 + i)
                    .is_some_and(|b| b.eq_ignore_ascii_case(&e))
            });
            if matches {
                return at + 1 + ending.len();
            }
        }
        at
    }

    /// The end of the piece that starts at `at` (`at < bytes.len()`).
    fn piece_end(&self, at: usize) -> usize {
        let b = self.bytes[at];
        // Alternatives 1 and 2: a word, after an optional prefix (a prefix is no letter, so a
        // word without one starts at `at` only when `b` is a letter).
        let word = if is_prefix(b) { at + 1 } else { at };
        let capitals = self.run(word, |b| b.is_ascii_uppercase());
        let lowercase = self.run(capitals, |b| b.is_ascii_lowercase());
        if lowercase > capitals || capitals > word {
            return self.contraction(lowercase);
        }
        if b.is_ascii_digit() {
            return self.run(at, |b| b.is_ascii_digit()).min(at + 3);
        }
        // Alternative 4: symbols, after an optional space.
        let symbols = if b == b' ' { at + 1 } else { at };
        if self.get(symbols).is_some_and(is_symbol) {
            let end = self.run(symbols, is_symbol);
            return self.run(end, |b| is_line_break(b) || b == b'/');
        }
        // Whitespace: `b` is a space of some kind (every other byte started a piece above).
        let spaces = self.run(at, is_space);
        if let Some(last_break) = self.bytes[at..spaces]
            .iter()
            .rposition(|&b| is_line_break(b))
        {
            return at + last_break + 1;
        }
        if self.get(spaces).is_some() && spaces - at >= 2 {
            spaces - 1
        } else {
            spaces
        }
    }
}

/// The end of the piece of `text` that starts at `at`, when the ASCII bytes before `ascii_end`
/// (the first byte that is not ASCII, or the end of the text) decide it: `None` when the
/// decision needed the character at `ascii_end` (the regex then splits there).
pub(super) fn ascii_piece_end(text: &str, ascii_end: usize, at: usize) -> Option<usize> {
    let ascii = Ascii {
        bytes: &text.as_bytes()[..ascii_end],
        past_end: Cell::new(false),
    };
    let end = ascii.piece_end(at);
    (!ascii.past_end.get() || ascii_end == text.len()).then_some(end)
}
