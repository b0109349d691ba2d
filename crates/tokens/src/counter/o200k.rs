//! o200k_base counted without a backtracking regex: tiktoken's own count, faster.
//!
//! tiktoken splits text into pieces with a pattern whose one lookahead (`\s+(?!\S)`: a run of
//! whitespace gives its last character to the word after it) makes `fancy-regex` run every
//! piece through its backtracking machine: about 5,000 instructions a piece, most of the time
//! a compaction spends counting the stubs and summaries it writes. Without that alternative
//! the pattern is an ordinary one, which `regex-automata` matches with the same leftmost-first
//! preference; the lookahead is then applied by hand (`regex_piece_end`), and ASCII is split without
//! any regex (`ascii_split.rs`). Each piece goes through
//! tiktoken's own byte-pair merge with the same ranks, so the count is the same number: the
//! tests compare both on random text and on every message of the corpus.

use std::sync::LazyLock;

use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};
use rustc_hash::FxHashMap;
use tiktoken_rs::{CoreBPE, Rank};

use super::ascii_split::ascii_piece_end;

/// tiktoken's o200k_base pattern without its two last alternatives (`\s+(?!\S)|\s+`), which
/// one `\s+` stands for here; `regex_piece_end` gives back what the lookahead takes.
const PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+"
);

/// Pieces at least this long that are not one token are merged by tiktoken itself, whose
/// merge for long pieces is not quadratic ([`merged_tokens`] is, as tiktoken's own merge of
/// short pieces).
const LONG_PIECE: usize = 100;

/// The o200k_base vocabulary's ranks and the lookahead-free split.
pub(super) struct O200k {
    bpe: &'static CoreBPE,
    split: Regex,
    ranks: FxHashMap<Vec<u8>, Rank>,
}

/// Built once per process from tiktoken's own vocabulary (`None` if it cannot be: the caller
/// then counts with tiktoken itself).
pub(super) fn o200k() -> Option<&'static O200k> {
    static O200K: LazyLock<Option<O200k>> =
        LazyLock::new(|| O200k::from(tiktoken_rs::o200k_base_singleton()));
    O200K.as_ref()
}

impl O200k {
    /// The ranks of `bpe`'s ordinary tokens, read back through its decoder (the special
    /// tokens, which ordinary text never produces, left out).
    fn from(bpe: &'static CoreBPE) -> Option<O200k> {
        let special: Vec<Rank> = bpe
            .special_tokens()
            .into_iter()
            .flat_map(|token| bpe.encode_with_special_tokens(token))
            .collect();
        // o200k_base has 199,998 ordinary tokens and its specials just above them.
        const RANKS_BELOW: Rank = 1 << 18;
        let mut ranks = FxHashMap::default();
        for rank in (0..RANKS_BELOW).filter(|r| !special.contains(r)) {
            if let Ok(bytes) = bpe.decode_bytes(&[rank]) {
                ranks.insert(bytes, rank);
            }
        }
        // The byte-pair merge needs every single byte to be a token (byte-level BPE).
        if !(0..=255u8).all(|b| ranks.contains_key([b].as_slice())) {
            return None;
        }
        Some(O200k {
            bpe,
            split: Regex::new(PATTERN).ok()?,
            ranks,
        })
    }

    /// The tokens of `text`, exactly as tiktoken's `encode_ordinary(text).len()`; `None` if
    /// the split ever left a gap (it cannot: every character starts a piece).
    pub(super) fn count(&self, text: &str) -> Option<usize> {
        let not_ascii_from = |at: usize| {
            text.as_bytes()[at..]
                .iter()
                .position(|b| !b.is_ascii())
                .map_or(text.len(), |i| at + i)
        };
        let mut ascii_end = not_ascii_from(0);
        let (mut tokens, mut at) = (0, 0);
        while at < text.len() {
            if at >= ascii_end {
                ascii_end = not_ascii_from(at);
            }
            let ascii = (at < ascii_end)
                .then(|| ascii_piece_end(text, ascii_end, at))
                .flatten();
            let end = match ascii {
                Some(end) => end,
                None => self.regex_piece_end(text, at)?,
            };
            tokens += self.piece_tokens(text.get(at..end)?);
            at = end;
        }
        Some(tokens)
    }

    /// The tokens of one piece: one when it is a token, else as many as the merge leaves.
    fn piece_tokens(&self, piece: &str) -> usize {
        let bytes = piece.as_bytes();
        if bytes.len() < 2 || self.ranks.contains_key(bytes) {
            1
        } else if bytes.len() < LONG_PIECE {
            merged_tokens(bytes, &self.ranks)
        } else {
            // Split alone, a piece splits as in its text: tiktoken gives it back whole.
            self.bpe.encode_ordinary(piece).len()
        }
    }
}

/// How many tokens tiktoken's byte-pair merge of short pieces (`_byte_pair_merge`, vendored
/// in tiktoken-rs, MIT) leaves of `piece` (2 to [`LONG_PIECE`] bytes): the same steps — merge
/// the adjacent pair of lowest rank, the leftmost of equals, until no pair is a token — on the
/// stack instead of in a vector, counted instead of collected.
fn merged_tokens(piece: &[u8], ranks: &FxHashMap<Vec<u8>, Rank>) -> usize {
    let rank_of = |bytes: &[u8]| ranks.get(bytes).copied().unwrap_or(Rank::MAX);
    // (start, rank of the pair starting there); then the last byte and the end.
    let mut parts = [(0usize, Rank::MAX); LONG_PIECE + 1];
    let mut len = 0;
    for i in 0..piece.len() - 1 {
        parts[len] = (i, rank_of(&piece[i..i + 2]));
        len += 1;
    }
    parts[len] = (piece.len() - 1, Rank::MAX);
    parts[len + 1] = (piece.len(), Rank::MAX);
    len += 2;
    // The rank of the part at `i` merged with the next one, `parts[i + 1]` not yet removed.
    let merged_rank = |parts: &[(usize, Rank)], len: usize, i: usize| {
        if i + 3 < len {
            rank_of(&piece[parts[i].0..parts[i + 3].0])
        } else {
            Rank::MAX
        }
    };
    loop {
        let mut min: (Rank, usize) = (Rank::MAX, usize::MAX);
        for (i, &(_, rank)) in parts[..len - 1].iter().enumerate() {
            if rank < min.0 {
                min = (rank, i);
            }
        }
        if min.0 == Rank::MAX {
            return len - 1;
        }
        let i = min.1;
        if i > 0 {
            parts[i - 1].1 = merged_rank(&parts, len, i - 1);
        }
        parts[i].1 = merged_rank(&parts, len, i);
        parts.copy_within(i + 2..len, i + 1);
        len -= 1;
    }
}

impl O200k {
    /// The end of the piece that starts at `at`, as tiktoken's pattern splits `text` (`None`
    /// if no piece starts there: it cannot happen, every character starts one).
    ///
    /// Where the pattern would take `\s+(?!\S)` (a whitespace run without a line break, not
    /// at the end of the text, of two characters or more), the run without its last character
    /// is the piece and that character starts the next: the lookahead backs off one character
    /// from a run followed by a non-space, and a run of one is taken whole by the last `\s+`.
    /// A match ending in whitespace other than a line break can only be that last
    /// alternative: every other one ends in a letter, mark, digit, symbol, `/` or a line
    /// break.
    fn regex_piece_end(&self, text: &str, at: usize) -> Option<usize> {
        // Anchored where the last piece ended: one forward pass finds the piece's end.
        let input = Input::new(text).range(at..).anchored(Anchored::Yes);
        let found = self.split.search(&input)?;
        let piece = &text[found.range()];
        let mut end = found.end();
        if end < text.len()
            && let Some(last) = piece.chars().next_back()
            && last.is_whitespace()
            && !matches!(last, '\r' | '\n')
            && piece.chars().nth(1).is_some()
        {
            end -= last.len_utf8();
        }
        Some(end)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tiktoken() -> &'static CoreBPE {
        tiktoken_rs::o200k_base_singleton()
    }

    fn same_as_tiktoken(text: &str) -> Result<(), TestCaseError> {
        let bpe = tiktoken();
        let fast = o200k().expect("o200k ranks").count(text);
        prop_assert_eq!(fast, Some(bpe.encode_ordinary(text).len()), "{:?}", text);
        Ok(())
    }

    #[test]
    fn whitespace_runs_give_their_last_character_to_the_next_word() {
        for text in [
            "",
            "a",
            "hello  world",
            "a \t\u{a0} b",
            "x   ",
            "x   \ny",
            "  \n\n  z",
            "fn main() {\n    let x = 1;\n}\n",
            "it's 'S 'ſ DON'T 12345 ½ ² ٣ 𝟙",
            "\u{3000}\u{3000}日本語 テキスト\r\n\r\n",
            "e\u{301}\u{301} a\u{300}b",
            "<|endoftext|> <|endofprompt|>",
            "a/b/c\n//\r\n/",
        ] {
            same_as_tiktoken(text).unwrap();
        }
    }

    proptest! {
        #[test]
        fn counts_as_tiktoken_does(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just(" "), Just("  "), Just("\t"), Just("\n"), Just("\r"), Just("\r\n"),
                    Just("\u{a0}"), Just("\u{3000}"), Just("\u{85}"), Just("\u{2028}"),
                    Just("a"), Just("Word"), Just("ABC"), Just("ǅ"), Just("ʰ"), Just("日"),
                    Just("\u{301}"), Just("é"), Just("'s"), Just("'LL"), Just("'"), Just("ſ"),
                    Just("1"), Just("2024"), Just("²"), Just("٣"), Just("Ⅷ"),
                    Just("/"), Just("."), Just("->"), Just("{"), Just("\""), Just("_"),
                    Just("😀"), Just("\u{1b}[0m"), Just("\u{0}"), Just("…"), Just("x'"),
                ],
                0..48,
            )
        ) {
            same_as_tiktoken(&parts.concat())?;
        }

        #[test]
        fn counts_any_text_as_tiktoken_does(text in any::<String>()) {
            same_as_tiktoken(&text)?;
        }

        #[test]
        fn counts_ascii_as_tiktoken_does(text in "[\\x00-\\x7f]{0,80}") {
            same_as_tiktoken(&text)?;
        }

        #[test]
        fn counts_ascii_words_and_spaces_as_tiktoken_does(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just(" "), Just("  "), Just("\t"), Just("\n"), Just("\r"), Just("\x0b"),
                    Just("\x0c"), Just("\x1c"), Just("a"), Just("Ab"), Just("ABC"), Just("x'S"),
                    Just("'re"), Just("'LL"), Just("'"), Just("1"), Just("2024"), Just("/"),
                    Just("("), Just("->"), Just("_"), Just("\x1b[0m"), Just("\0"), Just("\x7f"),
                ],
                0..48,
            )
        ) {
            same_as_tiktoken(&parts.concat())?;
        }
    }
}
