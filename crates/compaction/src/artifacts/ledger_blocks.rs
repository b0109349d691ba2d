//! The ledger as tagged blocks after a summary's body, and back.
//!
//! ```text
//! <commands>
//! npm run check (exit 2)
//! git status
//! +14 more
//! </commands>
//!
//! <more-commands>
//! cargo build
//! grep -rn
//! </more-commands>
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
//!
//! <named>
//! ThemeLoader.reload
//! </named>
//!
//! <paths>
//! packages/core/src/session.ts
//! </paths>
//!
//! <seen>
//! KeyError
//! test_empty_header
//! </seen>
//! ```
//!
//! Each block lists the newest items first (failed tests before the others), keeps at most its
//! cap and ends with `+N more` when some were left out. [`ArtifactLedger::render_within`] picks
//! the caps so that the blocks fit the room a summary has. The commands a full line has no room
//! for are named shortly in `<more-commands>`: each program with its first argument, once — a
//! few tokens instead of a line of up to 160 characters, and what a search for the command
//! starts with.

use super::block_lines::BlockLines;
use super::ledger::{ArtifactLedger, Recent, TestStatus};
use crate::tagged;
use troupe_tokens::TokenCounter;

/// Most commands listed by [`ArtifactLedger::render`].
pub(super) const MAX_COMMANDS: usize = 50;
/// Most error lines listed by [`ArtifactLedger::render`].
pub(super) const MAX_ERRORS: usize = 20;
/// Most tests listed by [`ArtifactLedger::render`].
pub(super) const MAX_TESTS: usize = 40;
/// Most symbols listed by [`ArtifactLedger::render`].
pub(super) const MAX_SYMBOLS: usize = 40;
/// Most names listed by [`ArtifactLedger::render`].
pub(super) const MAX_NAMED: usize = 40;
/// Most paths listed by [`ArtifactLedger::render`].
pub(super) const MAX_PATHS: usize = 60;
/// Most seen names listed by [`ArtifactLedger::render`].
pub(super) const MAX_SEEN: usize = 40;
/// Most short forms of commands listed by [`ArtifactLedger::render`].
pub(super) const MAX_MORE_COMMANDS: usize = 60;
/// Fewest items per block [`ArtifactLedger::render_within`] goes down to.
pub(super) const MIN_CAP: usize = 4;

/// The block tags (rendered in this order, but for `more-commands`, right after `commands`).
pub(super) const BLOCK_TAGS: [&str; 8] = [
    "commands",
    "errors",
    "tests",
    "symbols",
    "named",
    "paths",
    "seen",
    "more-commands",
];
/// How many blocks there are.
const BLOCKS: usize = BLOCK_TAGS.len();

/// How many items each block lists at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Commands.
    pub commands: usize,
    /// Error lines.
    pub errors: usize,
    /// Tests.
    pub tests: usize,
    /// Symbols.
    pub symbols: usize,
    /// Names the agent wrote.
    pub named: usize,
    /// Paths named outside the file lists.
    pub paths: usize,
    /// Error types and test names seen.
    pub seen: usize,
    /// Short forms of the commands beyond `commands`.
    pub more_commands: usize,
}

impl Caps {
    /// The fixed caps of [`ArtifactLedger::render`].
    pub const DEFAULT: Caps = Caps {
        commands: MAX_COMMANDS,
        errors: MAX_ERRORS,
        tests: MAX_TESTS,
        symbols: MAX_SYMBOLS,
        named: MAX_NAMED,
        paths: MAX_PATHS,
        seen: MAX_SEEN,
        more_commands: MAX_MORE_COMMANDS,
    };

    /// Caps in [`BLOCK_TAGS`] order.
    fn from_array(
        [
            commands,
            errors,
            tests,
            symbols,
            named,
            paths,
            seen,
            more_commands,
        ]: [usize; BLOCKS],
    ) -> Caps {
        Caps {
            commands,
            errors,
            tests,
            symbols,
            named,
            paths,
            seen,
            more_commands,
        }
    }

    /// The same cap for every block.
    pub fn all(cap: usize) -> Caps {
        Caps {
            commands: cap,
            errors: cap,
            tests: cap,
            symbols: cap,
            named: cap,
            paths: cap,
            seen: cap,
            more_commands: cap,
        }
    }
}

/// The blocks that get the room a common cap leaves, in turn (indices into [`BLOCK_TAGS`]):
/// short names first, so the room lists as many as it can; long command lines last.
const FILL_ORDER: [usize; BLOCKS] = [6, 7, 4, 5, 2, 3, 1, 0];

pub(super) const EXIT_OPEN: &str = " (exit ";

/// A block listing the first `cap` of `lines`, then `+N more` for the rest; `None` when empty.
pub(super) fn capped(tag: &str, lines: &[String], cap: usize) -> Option<String> {
    if lines.is_empty() {
        return None;
    }
    let more = lines.len().saturating_sub(cap);
    let mut listed: Vec<&str> = lines.iter().take(cap).map(String::as_str).collect();
    let more_line = format!("+{more} more");
    if more > 0 {
        listed.push(&more_line);
    }
    Some(format!("<{tag}>\n{}\n</{tag}>", listed.join("\n")))
}

pub(super) fn newest_first<V: Clone>(
    items: &Recent<V>,
    line: impl Fn(&str, &V) -> String,
) -> Vec<String> {
    items
        .oldest_first()
        .rev()
        .map(|(k, v)| line(k, v))
        .collect()
}

impl ArtifactLedger {
    /// The `<commands>`, `<errors>`, `<tests>`, `<symbols>`, `<named>`, `<paths>` and `<seen>` blocks (empty ones
    /// left out), separated by blank lines, with the default caps (`Caps::DEFAULT`).
    pub fn render(&self) -> String {
        self.render_capped(Caps::DEFAULT)
    }

    /// The blocks with as many items as fit `max_tokens` (counted by `counter`): every item
    /// when they fit; else each block gets a share — the newest items of every block under the
    /// largest common cap that fits (found by bisection, never below `MIN_CAP` (4)), so no
    /// block starves — and the room that leaves goes to the blocks with more to list, short
    /// names first (a block at a time, its cap raised as far as it fits). Left-out items show
    /// as `+N more`.
    pub fn render_within(&self, max_tokens: usize, counter: &dyn TokenCounter) -> String {
        let lens = self.block_lens();
        let longest = lens.iter().copied().max().unwrap_or(0);
        let lines = BlockLines::new(self);
        let everything = lines.render(Caps::all(longest.max(MIN_CAP)));
        if counter.count(&everything) <= max_tokens {
            return everything;
        }
        // A trial that is under the budget in bytes (no more tokens than bytes, for the
        // tokenizers that promise a bound) needs no count; the last trial that fitted is the
        // common cap the fill starts from, not counted again.
        let fitted = std::cell::Cell::new(None);
        let fits = |caps: [usize; BLOCKS]| {
            if fitted.get() == Some(caps) {
                return true;
            }
            let text = lines.render(Caps::from_array(caps));
            let fit = counter
                .count_upper_bound(&text)
                .is_some_and(|bound| bound <= max_tokens)
                || counter.count(&text) <= max_tokens;
            if fit {
                fitted.set(Some(caps));
            }
            fit
        };
        // The largest common cap in [MIN_CAP, longest) that fits; `lo` always fits or is the
        // floor.
        let (mut lo, mut hi) = (MIN_CAP, longest);
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if fits([mid; BLOCKS]) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let mut caps = [lo; BLOCKS];
        if fits(caps) {
            for block in FILL_ORDER {
                let (mut low, mut high) = (caps[block], lens[block] + 1);
                while low + 1 < high {
                    let mid = low + (high - low) / 2;
                    let mut trial = caps;
                    trial[block] = mid;
                    if fits(trial) {
                        low = mid;
                    } else {
                        high = mid;
                    }
                }
                caps[block] = low;
            }
        }
        lines.render(Caps::from_array(caps))
    }

    /// How many items each block has (at most), in [`BLOCK_TAGS`] order.
    fn block_lens(&self) -> [usize; BLOCKS] {
        [
            self.commands.len(),
            self.errors.len(),
            self.tests.len(),
            self.symbols.len(),
            self.named.len(),
            self.paths.len(),
            self.seen.len(),
            self.commands.len(),
        ]
    }

    /// The blocks with at most `caps` items each.
    pub fn render_capped(&self, caps: Caps) -> String {
        BlockLines::new(self).render(caps)
    }

    /// The ledger written in `text`'s blocks (as [`ArtifactLedger::render`] writes them).
    /// `+N more` lines and lines that do not parse are skipped. Give it only the part of a
    /// summary message that troupe renders (after `</summary>`), never a model's text.
    pub fn parse(text: &str) -> Self {
        let mut ledger = ArtifactLedger::default();
        // Every block opens with a tag: a text without one (most stubs) has nothing to parse.
        if !text.contains('<') {
            return ledger;
        }
        // Blocks list newest first; record oldest first so recency survives the round trip.
        // The short forms stand for commands older than those listed in full.
        for line in block_items(text, "more-commands").iter().rev() {
            ledger.commands.record(line.as_str(), None);
        }
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
        for line in block_items(text, "named").iter().rev() {
            ledger.named.record(line.as_str(), ());
        }
        for line in block_items(text, "paths").iter().rev() {
            ledger.paths.record(line.as_str(), ());
        }
        for line in block_items(text, "seen").iter().rev() {
            ledger.seen.record(line.as_str(), ());
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

/// A command's short form: the program and its first argument (`grep -rn`, `cat setup.py`).
pub(super) fn short_form(command: &str) -> String {
    command
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
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
        // The four left out are named by program and first argument, oldest last.
        assert!(
            text.contains("<more-commands>\necho 3\necho 2\necho 1\necho 0\n</more-commands>"),
            "{text}"
        );
        let parsed = ArtifactLedger::parse(&text);
        assert_eq!(parsed.commands.len(), MAX_COMMANDS + 4);
        assert_eq!(
            parsed.commands.oldest_first().next(),
            Some(("echo 0", &None))
        );
    }

    #[test]
    fn render_within_lists_everything_that_fits_and_halves_the_cap_until_it_fits() {
        let counter = troupe_tokens::TiktokenCounter::default();
        let mut ledger = ArtifactLedger::default();
        for i in 0..120 {
            ledger
                .commands
                .record(format!("npm run check -w package-{i}"), Some(0));
            ledger.named.record(format!("Component{i}.render"), ());
        }
        let all = ledger.render_within(usize::MAX, &counter);
        assert!(
            all.contains("package-0 ") && !all.contains("more"),
            "roomy: all listed"
        );
        assert_eq!(ArtifactLedger::parse(&all).commands.len(), 120);
        let tight = ledger.render_within(600, &counter);
        assert!(counter.count(&tight) <= 600, "{}", counter.count(&tight));
        assert!(tight.contains("package-119 "), "the newest stay: {tight}");
        assert!(tight.contains(" more\n</commands>"), "{tight}");
        let one_more =
            ledger.render_capped(Caps::all(ArtifactLedger::parse(&tight).commands.len() + 1));
        assert!(counter.count(&one_more) > 600, "the largest cap that fits");
        // Below what the smallest cap takes, the smallest cap is what is rendered.
        let floor = ledger.render_within(1, &counter);
        assert_eq!(ArtifactLedger::parse(&floor).commands.len(), MIN_CAP);
    }

    #[test]
    fn every_block_keeps_a_share_and_the_room_left_goes_to_short_names() {
        let counter = troupe_tokens::TiktokenCounter::default();
        let mut ledger = ArtifactLedger::default();
        for i in 0..200 {
            ledger.commands.record(
                format!("python scripts/run_experiment.py --config configs/exp{i}.toml --seed {i}"),
                Some(0),
            );
            crate::artifacts::paths::record_path(&mut ledger.paths, &format!("src/mod{i}.rs"));
        }
        ledger.seen.record("KeyError", ());
        let text = ledger.render_within(1_500, &counter);
        assert!(counter.count(&text) <= 1_500, "{}", counter.count(&text));
        let parsed = ArtifactLedger::parse(&text);
        // No block starves, the newest come first, and the room the common cap leaves went
        // to the short paths.
        assert!(
            parsed.commands.len() >= MIN_CAP && parsed.seen.len() == 1,
            "{text}"
        );
        assert!(parsed.paths.len() > parsed.commands.len(), "{text}");
        assert!(
            text.contains("src/mod199.rs") && text.contains("exp199.toml"),
            "{text}"
        );
        assert!(text.contains(" more\n</paths>") && text.contains(" more\n</commands>"));
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
