//! The artifact ledger: what an engineer looks up by name after a compaction — commands run
//! and their exit codes, errors seen, tests and their outcomes, symbols written — taken
//! deterministically from tool calls and tool results, rendered after every summary's body
//! as `<commands>`, `<errors>`, `<tests>` and `<symbols>` blocks, parsed back from the
//! previous summary and merged so the newest status wins.
//!
//! Touched files stay in [`FileLists`](crate::summary::FileLists); this ledger is the rest.

mod extract;
mod ledger;
mod render;
mod scan;

pub use extract::is_shell_tool;
pub use ledger::{ArtifactLedger, Recent, TestStatus};
pub use render::{BLOCK_TAGS, MAX_COMMANDS, MAX_ERRORS, MAX_SYMBOLS, MAX_TESTS};
pub use scan::{error_line, exit_code, symbol_definition, test_outcome};
