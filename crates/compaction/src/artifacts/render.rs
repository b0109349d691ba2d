//! The ledger as tagged blocks after a summary's body, and back.
//!
//! ```text
//! <commands>
//! npm run check (exit 2)
//! git status
//! +14 more
//! </commands>
//!
//! <errors>
//! error[E0308]: mismatched types
//! </errors>
//!
//! <tests>
//! passed parser::tests::eof
//! </tests>
//!
//! <symbols>
//! fn parse_header (src/lib.rs)
//! </symbols>
//! ```
//!
//! Each block lists the newest items first (failed tests before the others), keeps at most its
//! cap and ends with `+N more` when some were left out.

use super::ledger::{ArtifactLedger, Recent, TestStatus};
use crate::tagged;

/// Most commands listed.
pub const MAX_COMMANDS: usize = 50;
/// Most error lines listed.
pub const MAX_ERRORS: usize = 20;
/// Most tests listed.
pub const MAX_TESTS: usize = 40;
/// Most symbols listed.
pub const MAX_SYMBOLS: usize = 40;

/// The block tags, in rendering order.
pub const BLOCK_TAGS: [&str; 4] = ["commands", "errors", "tests", "symbols"];

const EXIT_OPEN: &str = " (exit ";

fn capped(tag: &str, mut lines: Vec<String>, cap: usize) -> Option<String> {
    if lines.is_empty() {
        return None;
    }
    let more = lines.len().saturating_sub(cap);
    lines.truncate(cap);
    if more > 0 {
        lines.push(format!("+{more} more"));
    }
    Some(format!("<{tag}>\n{}\n</{tag}>", lines.join("\n")))
}

fn newest_first<V: Clone>(items: &Recent<V>, line: impl Fn(&str, &V) -> String) -> Vec<String> {
    items
        .oldest_first()
        .rev()
        .map(|(k, v)| line(k, v))
        .collect()
}

impl ArtifactLedger {
    /// The `<commands>`, `<errors>`, `<tests>` and `<symbols>` blocks (empty ones left out),
    /// separated by blank lines.
    pub fn render(&self) -> String {
        let commands = newest_first(&self.commands, |command, exit| match exit {
            Some(code) => format!("{command}{EXIT_OPEN}{code})"),
            None => command.to_string(),
        });
        let errors = newest_first(&self.errors, |error, ()| error.to_string());
        let mut tests = newest_first(&self.tests, |name, status| {
            format!("{} {name}", status.as_str())
        });
        // Failures are what the next turn has to act on: list them first.
        tests.sort_by_key(|line| !line.starts_with(TestStatus::Failed.as_str()));
        let symbols = newest_first(&self.symbols, |symbol, path| match path {
            Some(path) => format!("{symbol} ({path})"),
            None => symbol.to_string(),
        });
        [
            capped("commands", commands, MAX_COMMANDS),
            capped("errors", errors, MAX_ERRORS),
            capped("tests", tests, MAX_TESTS),
            capped("symbols", symbols, MAX_SYMBOLS),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n\n")
    }

    /// The ledger written in `text`'s blocks (as [`ArtifactLedger::render`] writes them).
    /// `+N more` lines and lines that do not parse are skipped. Give it only the part of a
    /// summary message that troupe renders (after `</summary>`), never a model's text.
    pub fn parse(text: &str) -> Self {
        let mut ledger = ArtifactLedger::default();
        // Blocks list newest first; record oldest first so recency survives the round trip.
        for line in block_items(text, "commands").iter().rev() {
            match line
                .strip_suffix(')')
                .and_then(|l| l.rsplit_once(EXIT_OPEN))
                .and_then(|(command, code)| Some((command, code.parse::<i32>().ok()?)))
            {
                Some((command, code)) => ledger.commands.record(command, Some(code)),
                None => ledger.commands.record(line.as_str(), None),
            }
        }
        for line in block_items(text, "errors").iter().rev() {
            ledger.errors.record(line.as_str(), ());
        }
        let tests = block_items(text, "tests");
        // Failures were moved to the front; within each status the order is newest first.
        let mut in_order: Vec<(TestStatus, &str)> = tests
            .iter()
            .filter_map(|line| {
                let (status, name) = line.split_once(' ')?;
                Some((TestStatus::parse(status)?, name))
            })
            .collect();
        in_order.reverse();
        for (status, name) in in_order {
            ledger.tests.record(name, status);
        }
        for line in block_items(text, "symbols").iter().rev() {
            match line.strip_suffix(')').and_then(|l| l.rsplit_once(" (")) {
                Some((symbol, path)) => ledger.symbols.record(symbol, Some(path.to_string())),
                None => ledger.symbols.record(line.as_str(), None),
            }
        }
        ledger
    }

    /// `text` with every artifact block removed (a model that echoes them does not get to
    /// write the ledger).
    pub fn strip_blocks(text: &str) -> String {
        let mut out = text.to_string();
        for tag in BLOCK_TAGS {
            out = tagged::strip_blocks(&out, &format!("<{tag}>"), &format!("</{tag}>"));
        }
        out
    }
}

fn is_more_line(line: &str) -> bool {
    line.strip_prefix('+')
        .and_then(|l| l.strip_suffix(" more"))
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The item lines inside every `<tag>` … `</tag>` block of `text`, in order (`+N more` lines
/// are not items).
fn block_items(text: &str, tag: &str) -> Vec<String> {
    let mut items = tagged::block_items(text, &format!("<{tag}>"), &format!("</{tag}>"));
    items.retain(|l| !is_more_line(l));
    items
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn sample() -> ArtifactLedger {
        let mut ledger = ArtifactLedger::default();
        ledger.commands.record("cargo build", Some(101));
        ledger.commands.record("git status", None);
        ledger.errors.record("error[E0308]: mismatched types", ());
        ledger.tests.record("a::ok", TestStatus::Passed);
        ledger.tests.record("a::bad", TestStatus::Failed);
        ledger.tests.record("a::later", TestStatus::Passed);
        ledger.symbols.record("fn parse", Some("src/lib.rs".into()));
        ledger.symbols.record("class X", None);
        ledger
    }

    #[test]
    fn render_lists_newest_first_failures_first_and_parses_back() {
        let ledger = sample();
        let text = ledger.render();
        assert!(
            text.contains("<commands>\ngit status\ncargo build (exit 101)\n</commands>"),
            "{text}"
        );
        assert!(
            text.contains("<tests>\nfailed a::bad\npassed a::later\npassed a::ok\n</tests>"),
            "{text}"
        );
        assert!(text.contains("<symbols>\nclass X\nfn parse (src/lib.rs)\n</symbols>"));
        assert_eq!(ArtifactLedger::parse(&text).render(), text);
        assert_eq!(ArtifactLedger::parse(&text).commands, ledger.commands);
        assert_eq!(ArtifactLedger::parse(&text).symbols, ledger.symbols);
        assert_eq!(ArtifactLedger::default().render(), "");
    }

    #[test]
    fn a_long_block_is_capped_and_says_how_many_more() {
        let mut ledger = ArtifactLedger::default();
        for i in 0..MAX_COMMANDS + 4 {
            ledger.commands.record(format!("echo {i}"), Some(0));
        }
        let text = ledger.render();
        assert!(text.contains(&format!("echo {} (exit 0)", MAX_COMMANDS + 3)));
        assert!(!text.contains("echo 3 "), "oldest are left out: {text}");
        assert!(text.contains("\n+4 more\n</commands>"), "{text}");
        assert_eq!(ArtifactLedger::parse(&text).commands.len(), MAX_COMMANDS);
    }

    #[test]
    fn strip_blocks_removes_every_artifact_block() {
        let text = format!("keep\n{}\nalso keep", sample().render());
        let stripped = ArtifactLedger::strip_blocks(&text);
        assert!(stripped.starts_with("keep\n") && stripped.ends_with("\nalso keep"));
        assert!(!stripped.contains('<'), "{stripped}");
        assert!(ArtifactLedger::parse(&stripped).is_empty());
    }
}
