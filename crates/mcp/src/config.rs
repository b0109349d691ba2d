//! How to start an MCP server: command, arguments, environment, working directory, limits.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use troupe_tools::sandbox::Sandbox;

/// How long a server may take to answer `initialize` (and list its tools) by default.
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times a server that exited is started again, over its registration's lifetime.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// How to reach an MCP server: over stdio, a child process troupe starts and talks to through
/// its stdin and stdout (its stderr is kept, the last few KiB, to explain a failure); or over
/// streamable HTTP at a URL ([`McpServerConfig::http`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The program to run (looked up in `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it. It inherits only `PATH`, `HOME`, `LANG`, `LC_ALL`, `USER`,
    /// `LOGNAME`, `SHELL`, `TERM` and `TMPDIR` from troupe, so keys in troupe's environment
    /// reach a server only when named here.
    pub env: BTreeMap<String, String>,
    /// Its working directory; default: troupe's.
    pub cwd: Option<PathBuf>,
    /// The streamable HTTP endpoint of a server troupe does not start; when set, `command`,
    /// `args`, `env` and `cwd` are unused.
    pub url: Option<String>,
    /// HTTP headers sent with every request to `url` (e.g. `Authorization`).
    pub headers: BTreeMap<String, String>,
    /// How long `initialize` plus `tools/list` may take.
    pub init_timeout: Duration,
    /// How long one tool call may take; `None`: the registry's default timeout.
    pub call_timeout: Option<Duration>,
    /// How many times a server that exited is started again.
    pub max_restarts: u32,
    /// The sandbox a stdio server runs in, with its `cwd` (else troupe's directory) as the
    /// workspace; `None` (the default): unconfined, like any program the user starts. Where
    /// the kernel cannot give what the sandbox needs, the server is not started.
    pub sandbox: Option<Sandbox>,
}

impl McpServerConfig {
    /// A server started as `command` with no arguments.
    pub fn stdio(command: impl Into<String>) -> Self {
        McpServerConfig {
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            init_timeout: DEFAULT_INIT_TIMEOUT,
            call_timeout: None,
            max_restarts: DEFAULT_MAX_RESTARTS,
            sandbox: None,
        }
    }

    /// A server reached over streamable HTTP at `url` (e.g. `http://127.0.0.1:8000/mcp`).
    pub fn http(url: impl Into<String>) -> Self {
        McpServerConfig {
            url: Some(url.into()),
            ..McpServerConfig::stdio("")
        }
    }

    /// With one more HTTP header (streamable HTTP only).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// With one more argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// With these arguments after the ones already given.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// With one more environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Started in this directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// With this limit on `initialize` plus `tools/list`.
    pub fn init_timeout(mut self, timeout: Duration) -> Self {
        self.init_timeout = timeout;
        self
    }

    /// With this limit on each tool call.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// Run in `sandbox` (a stdio server), its `cwd` the workspace.
    pub fn sandboxed(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Started again at most `n` times after it exits.
    pub fn max_restarts(mut self, n: u32) -> Self {
        self.max_restarts = n;
        self
    }

    /// `command arg1 arg2` (or the URL), for messages.
    pub fn command_line(&self) -> String {
        if let Some(url) = &self.url {
            return url.clone();
        }
        std::iter::once(self.command.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}
