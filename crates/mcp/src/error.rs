//! Why an MCP server could not be registered.

use std::time::Duration;

use troupe_tools::RegistryError;

/// Why [`crate::register_mcp`] failed. Every variant names the server; the start-up ones name
/// the command too, since that is what the user has to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The process could not be started (no such program, not executable, bad directory).
    #[error("MCP server `{server}`: cannot start `{command}`: {cause}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The command line.
        command: String,
        /// The operating system's error.
        cause: std::io::Error,
    },
    /// The server's sandbox cannot be given on this system, or could not be set up; nothing
    /// was started.
    #[error("MCP server `{server}`: {cause}")]
    Sandbox {
        /// The server's name.
        server: String,
        /// What the sandbox lacks or what failed (it names how to choose `full`).
        cause: troupe_tools::sandbox::SandboxError,
    },
    /// The configured working directory is missing or not a directory; nothing was started.
    #[error("MCP server `{server}`: its cwd `{}` {reason}", cwd.display())]
    Cwd {
        /// The server's name.
        server: String,
        /// The directory as configured.
        cwd: std::path::PathBuf,
        /// `does not exist` or `is not a directory`.
        reason: &'static str,
    },
    /// The process started but did not answer `initialize` in time.
    #[error(
        "MCP server `{server}`: `{command}` did not answer `initialize` within {}s{stderr}",
        timeout.as_secs_f64()
    )]
    InitializeTimeout {
        /// The server's name.
        server: String,
        /// The command line.
        command: String,
        /// The limit it ran past.
        timeout: Duration,
        /// `; its stderr: …` when it wrote any, else empty.
        stderr: String,
    },
    /// The process answered `initialize` with an error, with garbage, or exited.
    #[error("MCP server `{server}`: `{command}` failed to initialize: {reason}{stderr}")]
    Initialize {
        /// The server's name.
        server: String,
        /// The command line.
        command: String,
        /// The protocol error.
        reason: String,
        /// `; its stderr: …` when it wrote any, else empty.
        stderr: String,
    },
    /// The server answered `initialize` but not `tools/list` in time (the same limit covers both).
    #[error(
        "MCP server `{server}`: `{command}` answered `initialize` but not `tools/list` within {}s{stderr}",
        timeout.as_secs_f64()
    )]
    ListToolsTimeout {
        /// The server's name.
        server: String,
        /// The command line.
        command: String,
        /// The limit it ran past (for `initialize` and `tools/list` together).
        timeout: Duration,
        /// `; its stderr: …` when it wrote any, else empty.
        stderr: String,
    },
    /// `tools/list` failed: an error, a broken connection, or a listing past troupe's bounds
    /// (pages, tools, bytes).
    #[error("MCP server `{server}`: listing its tools (`tools/list`) failed: {reason}")]
    ListTools {
        /// The server's name.
        server: String,
        /// The protocol error.
        reason: String,
    },
    /// The server's name could make its tools' names collide with another server's (see
    /// [`crate::server_name_problem`]); nothing was started.
    #[error("MCP server `{server}`: {reason}")]
    ServerName {
        /// The name as given.
        server: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A tool could not be added to the registry (its schema is not an object, …).
    #[error("MCP server `{server}`: tool `{tool}`: {cause}")]
    Register {
        /// The server's name.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The registry's refusal.
        cause: RegistryError,
    },
    /// A configured HTTP header is not a valid header.
    #[error("MCP server `{server}`: header `{header}`: {reason}")]
    InvalidHeader {
        /// The server's name.
        server: String,
        /// The header's name as configured.
        header: String,
        /// Why it is invalid.
        reason: String,
    },
    /// Serving as an MCP server failed (the client's `initialize`, or the connection).
    #[error("serving MCP over stdio failed: {reason}")]
    Serve {
        /// What went wrong.
        reason: String,
    },
}
