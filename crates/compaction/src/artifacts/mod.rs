//! The artifact ledger: what an engineer looks up by name after a compaction — commands run
//! and their exit codes, errors seen, tests and their outcomes, symbols written — taken
//! deterministically from tool calls and tool results, plus the names (backticked identifiers,
//! file paths) the agent itself wrote in its messages, quoted as written. Rendered after every
//! summary's body as `<commands>`, `<errors>`, `<tests>`, `<symbols>` and `<named>` blocks
//! sized to the room left, parsed back from the previous summary and merged so the newest
//! status wins. A summarizer's text never feeds it.
//!
//! Touched files stay in [`FileLists`](crate::summary::FileLists); this ledger is the rest.
//!
//! Every operation that takes text out of the context names what it hides with this ledger,
//! a stub as well as a summary: the one rule is in `hidden.rs`.

mod block_lines;
mod containing;
mod extract;
pub(crate) mod hidden;
mod ledger;
mod ledger_blocks;
mod names;
mod needles;
mod paths;
mod scan;
mod seen_names;

pub use ledger::{ArtifactLedger, TestStatus};
pub(crate) use scan::{error_kind, error_lines, exit_code};
