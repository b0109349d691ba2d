//! The lines of a text that can hold what a line scanner looks for, found in one pass.
//!
//! The scanners (`scan.rs`) look at every line of every tool output a compaction hides (the
//! names rule reads each one), and most lines hold nothing: a file's source, a listing. Each
//! scanner's match needs one of a few fixed strings on its line (an error line has `rror`,
//! `Exception` or `panicked at`), so a search for those over the whole text finds the lines
//! worth a look and the others are never split, trimmed or searched. An ANSI escape is a
//! needle of every scanner: stripping it may join the letters of a needle.

use memchr::memmem::Finder;

/// What [`str::lines`] gives for the line that holds byte `at` of `text`, and the offset of
/// the next line.
fn line_at(text: &str, at: usize) -> (&str, usize) {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let (end, next) = match text[at..].find('\n') {
        Some(i) => (at + i, at + i + 1),
        None => (text.len(), text.len()),
    };
    // `lines` strips the `\n` and then one `\r` before it; a last line without `\n` keeps it.
    let line = &text[start..end];
    let line = if end < text.len() {
        line.strip_suffix('\r').unwrap_or(line)
    } else {
        line
    };
    (line, next)
}

/// Fixed strings a scanner's match needs on its line.
pub(super) struct Needles(Vec<Finder<'static>>);

impl Needles {
    /// Finders of `needles` (none empty, none with a line break).
    pub(super) fn new(needles: &[&'static str]) -> Needles {
        Needles(needles.iter().map(|n| Finder::new(n.as_bytes())).collect())
    }

    /// The lines of `text` (as [`str::lines`] splits it, in order, each once) that contain a
    /// needle.
    ///
    /// Each needle is searched on its own (a vectorized search, far faster than one automaton
    /// over them all when they are rare): the next line is the first one any of them is next
    /// found on, and a needle found on a line taken is searched again after it.
    pub(super) fn lines<'a>(&'a self, text: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let bytes = text.as_bytes();
        let mut next: Vec<Option<usize>> = self.0.iter().map(|f| f.find(bytes)).collect();
        std::iter::from_fn(move || {
            let at = next.iter().flatten().min().copied()?;
            let (line, after) = line_at(text, at);
            for (finder, next) in self.0.iter().zip(next.iter_mut()) {
                if next.is_some_and(|found| found < after) {
                    *next = finder.find(&bytes[after..]).map(|found| after + found);
                }
            }
            Some(line)
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lines_by_filter<'a>(text: &'a str, needles: &[&str]) -> Vec<&'a str> {
        text.lines()
            .filter(|line| needles.iter().any(|n| line.contains(n)))
            .collect()
    }

    #[test]
    fn the_lines_that_hold_a_needle_as_lines_splits_them() {
        let needles = ["rror", "\u{1b}"];
        let automaton = Needles::new(&needles);
        let text = "ok\nTypeError: x\r\nno\n\nerror: a error\nlast\rError\r";
        let found: Vec<&str> = automaton.lines(text).collect();
        assert_eq!(found, ["TypeError: x", "error: a error", "last\rError\r"]);
        assert_eq!(found, lines_by_filter(text, &needles));
        assert_eq!(automaton.lines("").count(), 0);
    }

    proptest! {
        #[test]
        fn every_line_with_a_needle_and_no_other(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("rror"), Just("Error"), Just("\n"), Just("\r\n"), Just("\r"),
                    Just(" "), Just("x"), Just("é"), Just("::"), Just("\u{1b}[0m"),
                ],
                0..40,
            )
        ) {
            let text: String = parts.concat();
            let needles = ["rror", "::", "\u{1b}"];
            let automaton = Needles::new(&needles);
            let found: Vec<&str> = automaton.lines(&text).collect();
            prop_assert_eq!(found, lines_by_filter(&text, &needles));
        }
    }
}
