//! Line scanners over tool output and tool arguments: exit codes, error lines, test outcomes,
//! symbol definitions. Plain string matching, no model involved, so the result is the same
//! every time for the same text.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::ledger::TestStatus;
use super::needles::Needles;
use super::seen_names::identifiers;

/// An ANSI escape: stripping it (`strip_ansi`) may join what a scanner looks for.
const ESCAPE: &str = "\u{1b}";

/// What an error line ([`error_line`]) has on it: an error type ends with `Error` or
/// `Exception`, the compilers' and runtimes' markers hold `rror` or `panicked at`.
static ERROR_NEEDLES: LazyLock<Needles> =
    LazyLock::new(|| Needles::new(&["rror", "Exception", "panicked at", ESCAPE]));

/// What a test outcome line ([`test_outcome`]) has on it: a runner's marker.
static TEST_NEEDLES: LazyLock<Needles> = LazyLock::new(|| {
    Needles::new(&[
        "test ", "::", "--- ", "ok ", "\u{2713}", "\u{2714}", "\u{2715}", "\u{2716}", "\u{d7}",
        ESCAPE,
    ])
});

/// The longest item kept, in characters; longer ones are cut with `…`.
pub(super) const MAX_ITEM_CHARS: usize = 160;
/// This many error lines are taken from one tool result, and after them only errors of a kind
/// not seen yet (a compiler can print hundreds; the first ones matter most).
pub(super) const ERRORS_PER_RESULT: usize = 5;
/// At most this many symbols are taken from one edit.
pub(super) const SYMBOLS_PER_EDIT: usize = 40;

/// The longest error line kept: its kind and where it happened come first; the rest of the
/// message is for reading, not for searching.
pub(super) const ERROR_CHARS: usize = 120;

/// One line, whitespace collapsed, cut to [`MAX_ITEM_CHARS`].
pub(super) fn one_line(text: &str) -> String {
    let mut collapsed = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    if collapsed.chars().count() <= MAX_ITEM_CHARS {
        return collapsed;
    }
    let mut cut: String = collapsed.chars().take(MAX_ITEM_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Remove ANSI colour sequences (`ESC [ … letter`), which test runners love. Most lines have
/// none and are borrowed as they are (every line of every output scanned passes here).
fn strip_ansi(line: &str) -> Cow<'_, str> {
    if !line.contains('\u{1b}') {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The exit code a shell tool's result reports (`Command exited with code 2`,
/// `[The command completed with exit code 0.]`, `Exit code: 1`, `exit status 101`); the last
/// such report wins. `None` when the result says nothing about it.
pub(crate) fn exit_code(result: &str) -> Option<i32> {
    let lower = result.to_ascii_lowercase();
    let found = EXIT_NEEDLES
        .iter()
        .filter_map(|finder| last_end(finder, lower.as_bytes()))
        .max()?;
    code_after(&lower[found..])
}

/// The exit code that starts `rest` (after a report's words), past spaces, `:` and `=`.
fn code_after(rest: &str) -> Option<i32> {
    let rest = rest.trim_start_matches([' ', ':', '=']);
    let end = rest
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].parse().ok()
}

/// Where a shell tool's result reports its exit code, lowercased.
static EXIT_NEEDLES: LazyLock<[Finder<'static>; 4]> = LazyLock::new(|| {
    ["exited with code", "exit code", "exit status", "exit_code"]
        .map(|needle| Finder::new(needle.as_bytes()))
});

/// The end of the last occurrence of `finder`'s needle in `haystack` (as `rfind` finds it: an
/// occurrence that overlaps an earlier one counts), by a vectorized forward search.
fn last_end(finder: &Finder<'_>, haystack: &[u8]) -> Option<usize> {
    let mut last = None;
    let mut from = 0;
    while let Some(at) = finder.find(&haystack[from..]) {
        last = Some(from + at + finder.needle().len());
        from += at + 1;
    }
    last
}

/// Whether `word` names an error or exception type (`TypeError`, `std::io::Error`,
/// `java.lang.IllegalStateException`).
fn is_error_type(word: &str) -> bool {
    let ident = word.rsplit(['.', ':']).next().unwrap_or(word);
    (ident.ends_with("Error") || ident.ends_with("Exception"))
        && ident.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':'))
}

/// The error line in `line`, if it is one: Rust's `error[E0308]: …` and `error: …`, TypeScript's
/// `file(1,2): error TS2339: …`, Python's and JavaScript's `TypeError: …` (a traceback's last
/// line), a Rust panic, gcc's `fatal error: …`.
pub(super) fn error_line(line: &str) -> Option<String> {
    let line = strip_ansi(line);
    let t = line.trim();
    if let Some(at) = t.find("error[E") {
        return Some(one_line(&t[at..]));
    }
    if t.contains("error TS") || t.contains("fatal error:") || t.contains("panicked at") {
        return Some(one_line(t));
    }
    if t.starts_with("error:") {
        return Some(one_line(t));
    }
    let head = t.strip_prefix("Uncaught ").unwrap_or(t);
    let is_error = match head.split_once(": ") {
        Some((ty, message)) => is_error_type(ty) && !message.trim().is_empty(),
        None => is_error_type(head.trim_end_matches(':')),
    };
    is_error.then(|| one_line(head))
}

/// The error lines of a tool result, first ones first: at most [`ERRORS_PER_RESULT`], then
/// one more line for each kind of error not seen yet (a compiler's 40th line may be the only
/// `error TS2551`).
pub(crate) fn error_lines(result: &str) -> Vec<String> {
    // A line without a needle is no error line: only the others are looked at.
    error_lines_among(ERROR_NEEDLES.lines(result))
}

/// [`error_lines`] of the text whose lines that may be error lines are `lines`.
fn error_lines_among<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut kinds: Vec<String> = Vec::new();
    for line in lines {
        let Some(error) = error_line(line) else {
            continue;
        };
        let kind = error_kind(&error);
        if found.contains(&error) || (found.len() >= ERRORS_PER_RESULT && kinds.contains(&kind)) {
            continue;
        }
        kinds.push(kind);
        found.push(error);
    }
    found.into_iter().map(|e| cut(&e, ERROR_CHARS)).collect()
}

/// `text` cut to `chars` characters, ending with `…` when cut.
fn cut(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_string();
    }
    let mut out: String = text.chars().take(chars.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// What kind of error an error line is: `error TS2339`, `error[E0308]`, `TypeError`, or the
/// line's text before its first `: `.
pub(crate) fn error_kind(line: &str) -> String {
    if let Some(at) = line.find("error TS") {
        let code: String = line[at + "error TS".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        return format!("error TS{code}");
    }
    if let Some(at) = line.find("error[E") {
        let rest = &line[at..];
        return rest[..rest.find(']').map_or(rest.len(), |i| i + 1)].to_string();
    }
    line.split_once(": ")
        .map_or(line, |(kind, _)| kind)
        .to_string()
}

/// A test outcome named on `line`: `test a::b ... ok` (cargo), `tests/x.py::t PASSED` and
/// `FAILED tests/x.py::t - …` (pytest), `✓ name (3 ms)` / `✕ name` (jest, node), `ok 3 - name`
/// (TAP), `--- FAIL: TestX (0.01s)` (go).
pub(super) fn test_outcome(line: &str) -> Option<(String, TestStatus)> {
    let line = strip_ansi(line);
    let t = line.trim();
    if let Some(rest) = t.strip_prefix("test ")
        && let Some((name, outcome)) = rest.rsplit_once(" ... ")
    {
        let status = match outcome.trim() {
            "ok" => TestStatus::Passed,
            "FAILED" => TestStatus::Failed,
            "ignored" => TestStatus::Skipped,
            _ => return None,
        };
        return Some((one_line(name), status));
    }
    // The first two words only: this runs on every line of every output scanned.
    let mut words = t.split_whitespace();
    let pytest_status = |w: &str| match w {
        "PASSED" | "XPASS" => Some(TestStatus::Passed),
        "FAILED" | "ERROR" => Some(TestStatus::Failed),
        "SKIPPED" | "XFAIL" => Some(TestStatus::Skipped),
        _ => None,
    };
    if let (Some(first), Some(second)) = (words.next(), words.next()) {
        if first.contains("::")
            && let Some(status) = pytest_status(second)
        {
            return Some((one_line(first), status));
        }
        if second.contains("::")
            && let Some(status) = pytest_status(first)
        {
            return Some((one_line(second), status));
        }
    }
    for (mark, status) in [
        ("✓ ", TestStatus::Passed),
        ("✔ ", TestStatus::Passed),
        ("✕ ", TestStatus::Failed),
        ("✖ ", TestStatus::Failed),
        ("× ", TestStatus::Failed),
    ] {
        if let Some(name) = t.strip_prefix(mark) {
            return Some((one_line(without_duration(name)), status)).filter(|(n, _)| !n.is_empty());
        }
    }
    for (prefix, status) in [
        ("--- PASS: ", TestStatus::Passed),
        ("--- FAIL: ", TestStatus::Failed),
        ("--- SKIP: ", TestStatus::Skipped),
    ] {
        if let Some(name) = t.strip_prefix(prefix) {
            return Some((one_line(without_duration(name)), status));
        }
    }
    for (prefix, status) in [("not ok ", TestStatus::Failed), ("ok ", TestStatus::Passed)] {
        if let Some(rest) = t.strip_prefix(prefix)
            && let Some((number, name)) = rest.split_once(" - ")
            && number.chars().all(|c| c.is_ascii_digit())
        {
            let name = name.split(" # ").next().unwrap_or(name);
            return Some((one_line(name), status));
        }
    }
    None
}

/// The test outcomes named on the lines of `text`, first ones first ([`test_outcome`] of
/// each line that has a runner's marker on it).
pub(super) fn test_outcomes(text: &str) -> impl Iterator<Item = (String, TestStatus)> + '_ {
    TEST_NEEDLES.lines(text).filter_map(test_outcome)
}

/// `name (12 ms)` → `name`.
fn without_duration(name: &str) -> &str {
    match name.rsplit_once(" (") {
        Some((head, tail))
            if tail.ends_with(')') && tail.starts_with(|c: char| c.is_ascii_digit()) =>
        {
            head.trim()
        }
        _ => name.trim(),
    }
}

/// Words that may precede a definition keyword.
const MODIFIERS: [&str; 14] = [
    "pub",
    "pub(crate)",
    "pub(super)",
    "export",
    "default",
    "async",
    "static",
    "public",
    "private",
    "protected",
    "abstract",
    "unsafe",
    "override",
    "readonly",
];
/// Definition keywords, as written in the source.
const KEYWORDS: [&str; 9] = [
    "fn",
    "def",
    "class",
    "struct",
    "enum",
    "trait",
    "interface",
    "function",
    "type",
];
/// Words that look like a method header but are control flow.
const NOT_METHODS: [&str; 8] = [
    "if", "for", "while", "switch", "catch", "return", "match", "else",
];

fn ident_prefix(text: &str) -> &str {
    let end = text
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .map_or(text.len(), |(i, _)| i);
    &text[..end]
}

/// The symbol a source line defines: `fn parse`, `class Parser`, `def load`, or a method
/// header `render(width: number): string[] {` as `method render`.
pub(super) fn symbol_definition(line: &str) -> Option<String> {
    let mut rest = line.trim();
    loop {
        let word = rest.split_whitespace().next()?;
        if MODIFIERS.contains(&word) {
            rest = rest[word.len()..].trim_start();
        } else {
            break;
        }
    }
    let word = rest.split_whitespace().next()?;
    if KEYWORDS.contains(&word) {
        let after = rest[word.len()..].trim_start();
        let name = ident_prefix(after);
        let valid = name.chars().next().is_some_and(|c| !c.is_ascii_digit());
        return valid.then(|| format!("{word} {name}"));
    }
    let name = ident_prefix(rest);
    let is_method = !name.is_empty()
        && !NOT_METHODS.contains(&name)
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && rest[name.len()..].starts_with('(')
        && rest.ends_with('{')
        // `setTimeout(() => {` and `describe("x", () => {` call; they do not define.
        && !rest.contains("=>")
        && !rest[name.len() + 1..].starts_with(['"', '\'', '`']);
    is_method.then(|| format!("method {name}"))
}

/// The symbols defined in written text, first ones first, at most [`SYMBOLS_PER_EDIT`].
pub(super) fn symbol_definitions(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for symbol in text.lines().filter_map(symbol_definition) {
        if !found.contains(&symbol) {
            found.push(symbol);
            if found.len() == SYMBOLS_PER_EDIT {
                break;
            }
        }
    }
    found
}

/// Names declared anywhere on a line of prose (`I added class SessionStore`), as
/// `keyword name`; only names that look like code (an `_`, a capital or a digit), since
/// "a function that" declares nothing.
pub(super) fn declared_in_prose(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let words: Vec<&str> = identifiers(text).collect();
    for pair in words.windows(2) {
        let [keyword, name] = pair else { continue };
        let code_like = name.contains('_')
            || name
                .chars()
                .any(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        if !KEYWORDS.contains(keyword)
            || !code_like
            || name.starts_with(|c: char| c.is_ascii_digit())
        {
            continue;
        }
        let symbol = format!("{keyword} {name}");
        if !found.contains(&symbol) {
            found.push(symbol);
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
    fn names_declared_in_prose() {
        assert_eq!(
            declared_in_prose("I added class SessionStore and a function that fn parse_v2 runs"),
            ["class SessionStore", "fn parse_v2"]
        );
    }

    /// [`exit_code`] as it was written first: `rfind` of each report on the lowercased text.
    fn exit_code_by_rfind(result: &str) -> Option<i32> {
        let lower = result.to_ascii_lowercase();
        let found = ["exited with code", "exit code", "exit status", "exit_code"]
            .iter()
            .filter_map(|needle| lower.rfind(needle).map(|at| at + needle.len()))
            .max()?;
        code_after(&lower[found..])
    }

    /// Text made of what the scanners look for, and what they must not be fooled by.
    fn scanned_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("Error"),
                Just("ValueError"),
                Just("Exception"),
                Just("test_"),
                Just("test "),
                Just("rror"),
                Just("error[E0308]: x"),
                Just("error: "),
                Just(": "),
                Just("::"),
                Just(" ... ok"),
                Just(" ... FAILED"),
                Just("PASSED"),
                Just("--- FAIL: "),
                Just("ok 1 - "),
                Just("not ok "),
                Just("\u{2713} "),
                Just("\u{d7} "),
                Just("panicked at"),
                Just("Uncaught "),
                Just("\u{1b}[31m"),
                Just("E\u{1b}[0mrror"),
                Just("\n"),
                Just("\r\n"),
                Just("\r"),
                Just(" "),
                Just("  "),
                Just("_"),
                Just("a"),
                Just("Z"),
                Just("9"),
                Just("é"),
                Just("."),
                Just("("),
                Just("exit code"),
                Just("EXIT_CODE="),
                Just("Exited with code "),
                Just("exit status"),
                Just("xit code"),
                Just("e"),
                Just("-"),
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn scanning_only_the_lines_with_a_needle_finds_what_every_line_gives(
            text in scanned_text()
        ) {
            prop_assert_eq!(error_lines(&text), error_lines_among(text.lines()));
            let outcomes: Vec<_> = test_outcomes(&text).collect();
            let every_line: Vec<_> = text.lines().filter_map(test_outcome).collect();
            prop_assert_eq!(outcomes, every_line);
            prop_assert_eq!(exit_code(&text), exit_code_by_rfind(&text));
        }
    }

    #[test]
    fn exit_codes_in_the_shapes_agents_report_them() {
        assert_eq!(exit_code("out\n\nCommand exited with code 2"), Some(2));
        assert_eq!(
            exit_code("[The command completed with exit code 0.]"),
            Some(0)
        );
        assert_eq!(exit_code("Exit code: 101\n"), Some(101));
        assert_eq!(exit_code("just output"), None);
        assert_eq!(exit_code("exit code unknown"), None);
    }

    #[test]
    fn error_lines_of_several_languages() {
        let out = "Compiling x\nerror[E0308]: mismatched types\n  --> src/a.rs:3:5\nTraceback (most recent call last):\n  File \"a.py\", line 1\nTypeError: unsupported operand\nsrc/x.ts(28,2): error TS2739: Type is missing\nAssertionError\nnot an error: here\nthread 'main' panicked at src/main.rs:2:5:";
        assert_eq!(
            error_lines(out),
            [
                "error[E0308]: mismatched types",
                "TypeError: unsupported operand",
                "src/x.ts(28,2): error TS2739: Type is missing",
                "AssertionError",
                "thread 'main' panicked at src/main.rs:2:5:",
            ]
        );
        assert_eq!(error_line("    raise ValueError(\"bad\")"), None);
    }

    #[test]
    fn past_the_first_errors_only_new_kinds_are_kept_and_lines_are_cut() {
        let mut out: String = (0..30)
            .map(|i| format!("src/f{i}.ts(1,1): error TS2339: Property 'p{i}' does not exist\n"))
            .collect();
        out.push_str("src/g.ts(2,2): error TS2551: Did you mean 'x'?\n");
        out.push_str(&format!("TypeError: {}\n", "x".repeat(300)));
        let lines = error_lines(&out);
        assert_eq!(lines.len(), ERRORS_PER_RESULT + 2, "{lines:#?}");
        assert!(lines[ERRORS_PER_RESULT].contains("error TS2551"));
        assert_eq!(lines[ERRORS_PER_RESULT + 1].chars().count(), ERROR_CHARS);
        assert!(lines[ERRORS_PER_RESULT + 1].ends_with('…'));
        assert_eq!(error_kind(&lines[0]), "error TS2339");
        assert_eq!(error_kind("error[E0308]: mismatched types"), "error[E0308]");
        assert_eq!(error_kind("TypeError: bad"), "TypeError");
    }

    #[test]
    fn test_outcomes_of_several_runners() {
        let cases = [
            (
                "test parser::tests::eof ... ok",
                "parser::tests::eof",
                TestStatus::Passed,
            ),
            ("test a::b ... FAILED", "a::b", TestStatus::Failed),
            (
                "tests/test_x.py::test_y PASSED  [ 50%]",
                "tests/test_x.py::test_y",
                TestStatus::Passed,
            ),
            (
                "FAILED tests/test_x.py::test_z - AssertionError",
                "tests/test_x.py::test_z",
                TestStatus::Failed,
            ),
            (
                "  ✓ renders the logo (3 ms)",
                "renders the logo",
                TestStatus::Passed,
            ),
            (
                "  ✕ wraps long lines",
                "wraps long lines",
                TestStatus::Failed,
            ),
            (
                "not ok 2 - truncates text",
                "truncates text",
                TestStatus::Failed,
            ),
            (
                "--- FAIL: TestParse (0.00s)",
                "TestParse",
                TestStatus::Failed,
            ),
        ];
        for (line, name, status) in cases {
            assert_eq!(
                test_outcome(line),
                Some((name.to_string(), status)),
                "{line}"
            );
        }
        assert_eq!(test_outcome("running 3 tests"), None);
    }

    #[test]
    fn symbol_definitions_in_written_code() {
        let code = "pub(crate) fn parse_header(x: &str) {\n}\nclass Parser:\n    def load(self):\nexport default function render() {\n\trender(width: number): string[] {\n\tif (x) {\n  setTimeout(() => {\n  describe(\"wraps\", () => {\nstruct Point { x: i32 }\nlet x = 3;";
        assert_eq!(
            symbol_definitions(code),
            [
                "fn parse_header",
                "class Parser",
                "def load",
                "function render",
                "method render",
                "struct Point"
            ]
        );
    }
}
