//! Tier 2: an old tool result becomes a one-line metadata stub built from the file ledger.
//!
//! The stub says what happened (`read src/app.rs (5000 lines, sha256 3f2a9c1d)`) without the
//! content, which the agent can read again if it needs it. Facts come from the ledger, so a stub
//! never depends on parsing a tool's output format.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;

use crate::artifacts::{error_kind, error_lines, exit_code};
use troupe_protocol::{FileAccess, FileLedger, LedgerEntry};

/// Every stub starts with this, which is also how an already-masked result is recognised.
pub(crate) const STUB_PREFIX: &str = "[compressed]";

/// How many hex digits of a sha256 a stub shows.
const SHA_PREFIX_LEN: usize = 8;

/// The stub text for the result of call `tool_call_id` (tool `tool_name`) whose output was
/// `output`, from the ledger's entries for that call.
pub(crate) fn stub_text(
    tool_name: Option<&str>,
    tool_call_id: &str,
    output: &str,
    ledger: &FileLedger,
) -> String {
    let mut lines: Vec<String> = Vec::new();
    for entry in ledger.for_call(tool_call_id) {
        let line = ledger_line(entry, output);
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    if lines.is_empty() {
        let tool = tool_name.unwrap_or("tool");
        let n = line_count(output);
        let unit = if n == 1 { "line" } else { "lines" };
        let mut stub = format!("{STUB_PREFIX} {tool} returned {n} {unit}");
        if let Some(code) = exit_code(output) {
            stub.push_str(&format!(", exit code {code}"));
        }
        // An error is the one fact about a generic output the agent most needs to keep: the
        // first error line, and the kind of every other error (a compiler's later errors are
        // often of kinds the first does not show).
        if let Some(error) = first_error_line(output) {
            stub.push_str(&format!("; first error: {error}"));
            let first_kind = error_kind(&error);
            let mut others: Vec<String> = Vec::new();
            for kind in error_lines(output).iter().map(|e| error_kind(e)) {
                if kind != first_kind && !others.contains(&kind) && others.len() < OTHER_ERROR_KINDS
                {
                    others.push(kind);
                }
            }
            if !others.is_empty() {
                stub.push_str(&format!("; also: {}", others.join(", ")));
            }
        }
        lines.push(stub);
    }
    lines.join("\n")
}

fn ledger_line(entry: &LedgerEntry, output: &str) -> String {
    let mut details: Vec<String> = Vec::new();
    if let Some((start, end)) = entry.lines {
        details.push(format!("lines {start}-{end}"));
    }
    match entry.line_count {
        Some(n) => details.push(format!("{n} lines")),
        // A read without a recorded size: the output is the best measure of what was read.
        None if entry.access == FileAccess::Read && entry.lines.is_none() => {
            details.push(format!("{} lines", line_count(output)));
        }
        None => {}
    }
    if let Some(sha) = &entry.sha256 {
        let prefix: String = sha.chars().take(SHA_PREFIX_LEN).collect();
        details.push(format!("sha256 {prefix}"));
    }
    let verb = if entry.access.is_modification() {
        "modified"
    } else {
        "read"
    };
    if details.is_empty() {
        format!("{STUB_PREFIX} {verb} {}", entry.path)
    } else {
        format!(
            "{STUB_PREFIX} {verb} {} ({})",
            entry.path,
            details.join(", ")
        )
    }
}

/// Words that mark an error line in tool output.
const ERROR_WORDS: [&str; 6] = [
    "error",
    "failed",
    "traceback",
    "exception",
    "panicked",
    "fatal",
];
/// Kinds of errors besides the first that a stub names.
const OTHER_ERROR_KINDS: usize = 8;
/// Characters of an error line a stub keeps.
const ERROR_LINE_CHARS: usize = 120;

/// [`ERROR_WORDS`] in any ASCII case, as one automaton.
static ERROR_WORDS_ANY_CASE: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(ERROR_WORDS)
        .ok()
});

/// Whether `line`, lowercased, holds one of [`ERROR_WORDS`].
fn marks_an_error(line: &str) -> bool {
    let lower = line.to_lowercase();
    ERROR_WORDS.iter().any(|w| lower.contains(w))
}

/// The first line of `output` (trimmed) that [`marks_an_error`].
///
/// One pass finds the first ASCII spelling of a word in any case; its line is the answer
/// unless an earlier line that is not ASCII lowercases to one (the Kelvin sign is a `k`): only
/// those are lowercased and searched, not every line of a long output.
fn first_error_marked_line(output: &str) -> Option<&str> {
    let Some(words) = ERROR_WORDS_ANY_CASE.as_ref() else {
        return output.lines().map(str::trim).find(|l| marks_an_error(l));
    };
    let hit = words.find(output).map_or(output.len(), |m| m.start());
    let mut end = 0;
    // `str::lines`, with where each line ends.
    for raw in output.split_inclusive('\n') {
        end += raw.len();
        let line = match raw.strip_suffix('\n') {
            Some(line) => line.strip_suffix('\r').unwrap_or(line),
            None => raw,
        };
        let line = line.trim();
        if hit < end || (!line.is_ascii() && marks_an_error(line)) {
            return Some(line);
        }
    }
    None
}

fn first_error_line(output: &str) -> Option<String> {
    let line = first_error_marked_line(output)?;
    let mut short: String = line.chars().take(ERROR_LINE_CHARS).collect();
    if short.len() < line.len() {
        short.push('…');
    }
    Some(short)
}

/// Lines of `text`, counting a final line without a newline.
pub(crate) fn line_count(text: &str) -> usize {
    text.lines().count()
}

/// Whether a tool result's text is already a stub.
pub(crate) fn is_stub(text: &str) -> bool {
    text.starts_with(STUB_PREFIX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_first_error_marked_line_is_the_first_line_that_lowercases_to_an_error_word(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("error"), Just("ERROR"), Just("Failed"), Just("panic\u{212a}ed"),
                    Just("FATAL"), Just("Traceback"), Just("exceptio"), Just("n"), Just("é"),
                    Just("\u{130}"), Just("\n"), Just("\r\n"), Just(" "), Just("ok"),
                ],
                0..30,
            )
        ) {
            let output = parts.concat();
            prop_assert_eq!(
                first_error_marked_line(&output),
                output.lines().map(str::trim).find(|l| marks_an_error(l))
            );
        }
    }

    #[test]
    fn a_generic_stub_keeps_the_exit_code_the_first_error_and_the_other_error_kinds() {
        let output = "src/a.ts(1,1): error TS2339: no p\nsrc/b.ts(2,2): error TS2339: no q\n\
                      src/c.ts(3,3): error TS2551: did you mean\nCommand exited with code 2";
        let stub = stub_text(Some("bash"), "c1", output, &FileLedger::new());
        assert_eq!(
            stub,
            "[compressed] bash returned 4 lines, exit code 2; first error: \
             src/a.ts(1,1): error TS2339: no p; also: error TS2551"
        );
    }

    #[test]
    fn modified_stub_names_line_range() {
        let mut ledger = FileLedger::new();
        ledger.record(
            LedgerEntry::new("src/a.rs", FileAccess::Edited)
                .with_call("c")
                .with_lines(234, 250),
        );
        ledger.record(
            LedgerEntry::new("src/a.rs", FileAccess::Edited)
                .with_call("c")
                .with_lines(234, 250),
        );
        assert_eq!(
            stub_text(Some("edit"), "c", "ok", &ledger),
            "[compressed] modified src/a.rs (lines 234-250)"
        );
        assert!(is_stub(&stub_text(None, "zzz", "one", &ledger)));
        assert_eq!(
            stub_text(None, "zzz", "one", &ledger),
            "[compressed] tool returned 1 line"
        );
        assert_eq!(
            stub_text(
                Some("bash"),
                "zzz",
                "ok\nerror[E0308]: mismatched types\n",
                &ledger
            ),
            "[compressed] bash returned 2 lines; first error: error[E0308]: mismatched types"
        );
    }

    #[test]
    fn stub_text_shows_ledger_metadata_or_line_count() {
        use troupe_protocol::{FileAccess, FileLedger, LedgerEntry};
        let mut ledger = FileLedger::new();
        ledger.record(
            LedgerEntry::new("src/app.rs", FileAccess::Read)
                .with_call("c1")
                .with_line_count(5000)
                .with_sha256("3f2a9c1d00aa"),
        );
        assert_eq!(
            stub_text(Some("read"), "c1", "…", &ledger),
            "[compressed] read src/app.rs (5000 lines, sha256 3f2a9c1d)"
        );
        assert_eq!(
            stub_text(Some("bash"), "c2", "a\nb\n", &ledger),
            "[compressed] bash returned 2 lines"
        );
    }
}
