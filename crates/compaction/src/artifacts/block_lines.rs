//! The ledger's item lines, prepared once for rendering under many caps.
//!
//! [`ArtifactLedger::render_within`] bisects the caps: a dozen to forty renderings of one ledger
//! to find what fits a summary's room. Only two things in a rendering depend on the caps —
//! which paths and seen names a listed line already spells out, and which older commands a
//! listed command already stands for — so both are worked out here once, per item, as the
//! first listed position that says it; a rendering under caps then compares indices instead of
//! searching every listed line for every name again (the search was most of a compaction's
//! time on a long session).

use super::containing::first_containing;
use super::ledger::{ArtifactLedger, TestStatus};
use super::ledger_blocks::{Caps, EXIT_OPEN, capped, newest_first, short_form};

/// Never listed: a name no line of a block spells out.
const NOWHERE: usize = usize::MAX;

/// A name (a path or a seen name) and, per block that can spell it out (commands, errors,
/// tests, symbols), the first line of that block that does.
struct Spelled {
    name: String,
    first_in: [usize; 4],
}

impl Spelled {
    /// Each of `names` with the first line of each of `blocks` that contains it.
    fn all(names: Vec<String>, blocks: [&[String]; 4]) -> Vec<Spelled> {
        let keys: Vec<&str> = names.iter().map(String::as_str).collect();
        let per_block =
            blocks.map(|lines| first_containing(&keys, lines.iter().map(String::as_str)));
        names
            .into_iter()
            .enumerate()
            .map(|(i, name)| Spelled {
                name,
                first_in: [0, 1, 2, 3].map(|b| per_block[b][i].unwrap_or(NOWHERE)),
            })
            .collect()
    }

    /// Whether a line listed under `shown` caps (per block) spells the name out.
    fn said(&self, shown: [usize; 4]) -> bool {
        self.first_in.iter().zip(shown).any(|(&at, cap)| at < cap)
    }
}

/// The ledger's lines, newest first in each block, with what every cap-dependent choice needs.
pub(super) struct BlockLines {
    commands: Vec<String>,
    errors: Vec<String>,
    tests: Vec<String>,
    symbols: Vec<String>,
    named: Vec<String>,
    paths: Vec<Spelled>,
    seen: Vec<Spelled>,
    /// Per command (newest first): its short form, and the first command line whose own short
    /// form is the same (a listed command stands for the older ones that start like it).
    short_forms: Vec<(String, usize)>,
}

impl BlockLines {
    pub(super) fn new(ledger: &ArtifactLedger) -> BlockLines {
        let commands = newest_first(&ledger.commands, |command, exit| match exit {
            Some(code) => format!("{command}{EXIT_OPEN}{code})"),
            None => command.to_string(),
        });
        let line_shorts: Vec<String> = commands.iter().map(|l| short_form(l)).collect();
        let short_forms = ledger
            .commands
            .oldest_first()
            .rev()
            .map(|(command, _)| {
                let short = short_form(command);
                let first = line_shorts
                    .iter()
                    .position(|s| *s == short)
                    .unwrap_or(NOWHERE);
                (short, first)
            })
            .collect();
        let errors = newest_first(&ledger.errors, |error, ()| error.to_string());
        let mut tests = newest_first(&ledger.tests, |name, status| {
            format!("{} {name}", status.as_str())
        });
        // Failures are what the next turn has to act on: list them first.
        tests.sort_by_key(|line| !line.starts_with(TestStatus::Failed.as_str()));
        let symbols = newest_first(&ledger.symbols, |symbol, path| match path {
            Some(path) => format!("{symbol} ({path})"),
            None => symbol.to_string(),
        });
        let named = newest_first(&ledger.named, |name, ()| name.to_string());
        let blocks = [
            commands.as_slice(),
            errors.as_slice(),
            tests.as_slice(),
            symbols.as_slice(),
        ];
        let paths = Spelled::all(
            newest_first(&ledger.paths, |path, ()| path.to_string()),
            blocks,
        );
        let seen = Spelled::all(
            newest_first(&ledger.seen, |name, ()| name.to_string()),
            blocks,
        );
        BlockLines {
            commands,
            errors,
            tests,
            symbols,
            named,
            paths,
            seen,
            short_forms,
        }
    }

    /// The blocks with at most `caps` items each. A path or a seen name that a listed command,
    /// error, test or symbol line already spells out is not listed again (it is named once).
    pub(super) fn render(&self, caps: Caps) -> String {
        let mut more_commands: Vec<String> = Vec::new();
        for (short, first) in self.short_forms.iter().skip(caps.commands) {
            if *first >= caps.commands && !more_commands.contains(short) {
                more_commands.push(short.clone());
            }
        }
        let shown = [caps.commands, caps.errors, caps.tests, caps.symbols];
        let unsaid = |names: &[Spelled]| -> Vec<String> {
            names
                .iter()
                .filter(|n| !n.said(shown))
                .map(|n| n.name.clone())
                .collect()
        };
        [
            capped("commands", &self.commands, caps.commands),
            capped("more-commands", &more_commands, caps.more_commands),
            capped("errors", &self.errors, caps.errors),
            capped("tests", &self.tests, caps.tests),
            capped("symbols", &self.symbols, caps.symbols),
            capped("named", &self.named, caps.named),
            capped("paths", &unsaid(&self.paths), caps.paths),
            capped("seen", &unsaid(&self.seen), caps.seen),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n\n")
    }
}
