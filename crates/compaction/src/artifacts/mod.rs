//! The artifact ledger: what an engineer looks up by name after a compaction — commands run
//! and their exit codes, errors seen, tests and their outcomes, symbols written — taken
//! deterministically from tool calls and tool results, plus the names (backticked identifiers,
//! file paths) the agent itself wrote in its messages, quoted as written. Rendered after every
//! summary's body as `<commands>`, `<errors>`, `<tests>`, `<symbols>` and `<named>` blocks
//! sized to the room left, parsed back from the previous summary and merged so the newest
//! status wins. A summarizer's text never feeds it.
//!
//! Touched files stay in [`FileLists`](crate::summary::FileLists); this ledger is the rest.

mod extract;
mod ledger;
mod names;
mod render;
mod scan;

pub use extract::is_shell_tool;
pub use ledger::{ArtifactLedger, Recent, TestStatus};
pub use names::names_in_prose;
pub use render::{
    BLOCK_TAGS, Caps, MAX_COMMANDS, MAX_ERRORS, MAX_NAMED, MAX_SYMBOLS, MAX_TESTS, MIN_CAP,
};
pub use scan::{error_kind, error_line, error_lines, exit_code, symbol_definition, test_outcome};
