//! Built-in tools.
//!
//! The five file tools ([`file_tools`]) are confined to [`crate::ToolContext::root`]; the ones
//! that read or change a file's content (`read_file`, `write_file`, `edit_file`) record into the
//! context's ledger. `list_dir` and `grep` do not: they show names and matching lines, not a
//! file's content, and listing every file they touched as "read" would drown the files an agent
//! really studied in compaction's `<read-files>` list.
//!
//! `shell` and `http_get` reach beyond the workspace, so they are never registered unless asked
//! for: `registry.register(builtin::shell_tool(ShellConfig::default()))`.
//! `shell` runs with a cleared environment plus an allow-list ([`ShellConfig::env_allowlist`]);
//! `http_get` checks host, port and the address it connects to ([`HttpGetConfig`]).

mod capped_output;
mod edit_file;
mod grep;
mod http_allowlist;
mod http_get;
mod http_resolver;
mod list_dir;
mod read_file;
mod shell;
mod text;
mod write_file;

pub use edit_file::{EditFile, EditFileArgs, EditFileOutput};
pub use grep::{Grep, GrepArgs};
pub use http_allowlist::{AllowListError, AllowedHost, is_public};
pub use http_get::{HttpGet, HttpGetArgs, HttpGetConfig, http_get_tool};
pub use list_dir::{ListDir, ListDirArgs};
pub use read_file::{ReadFile, ReadFileArgs, ReadFileOutput};
pub use shell::{BASE_ENV, Shell, ShellArgs, ShellConfig, shell_tool};
pub use text::{line_count, sha256_hex};
pub use write_file::{WriteFile, WriteFileArgs, WriteFileOutput};

use crate::registry::ToolRegistry;

/// A registry holding `read_file`, `write_file`, `edit_file`, `list_dir` and `grep`.
pub fn file_tools() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.add_file_tools();
    registry
}

impl ToolRegistry {
    /// A registry holding the five file tools (see [`file_tools`]).
    pub fn with_file_tools() -> Self {
        file_tools()
    }

    /// Register the five file tools, skipping any name already taken (so a custom `read_file`
    /// registered earlier wins).
    pub fn add_file_tools(&mut self) -> &mut Self {
        // Registration only fails on a taken name here: the built-in names and schemas are valid.
        if !self.contains("read_file") {
            let _ = self.register(ReadFile);
        }
        if !self.contains("write_file") {
            let _ = self.register(WriteFile);
        }
        if !self.contains("edit_file") {
            let _ = self.register(EditFile);
        }
        if !self.contains("list_dir") {
            let _ = self.register(ListDir);
        }
        if !self.contains("grep") {
            let _ = self.register(Grep);
        }
        self
    }
}
