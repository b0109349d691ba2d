//! `shell` (opt-in): run a command with `sh -c` in the workspace root, with a timeout, an
//! allow-listed environment and output capped while it is read.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::capped_output::CappedOutput;
use super::process_group::CommandGroup;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;

/// How the `shell` tool runs commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellConfig {
    /// A command running longer is killed (default 60 s).
    pub timeout: Duration,
    /// Most bytes of stdout and of stderr kept, each cut in the middle beyond that while it is
    /// read (default 16 KiB).
    pub max_output_bytes: usize,
    /// The shell; it is run as `<shell> -c <command>` (default `sh`).
    pub shell: PathBuf,
    /// Environment variables passed to the command besides [`BASE_ENV`] (default none). The
    /// command starts from an empty environment, so troupe's own — API keys included — stays
    /// out of the model's reach unless named here.
    pub env_allowlist: Vec<String>,
}

/// Environment variables every command gets (when troupe has them): where programs are and
/// whose home and language it is.
pub const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG"];

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig {
            timeout: Duration::from_secs(60),
            max_output_bytes: 16 * 1024,
            shell: PathBuf::from("sh"),
            env_allowlist: Vec::new(),
        }
    }
}

/// The `shell` tool; see [`shell_tool`].
#[derive(Debug, Clone, Default)]
pub struct Shell {
    config: ShellConfig,
}

/// A `shell` tool to register: `registry.register(shell_tool(ShellConfig::default()))`.
///
/// The command runs with the workspace root as its working directory, but the shell itself is
/// not confined to it: register this only for agents you would trust with a terminal.
pub fn shell_tool(config: ShellConfig) -> Shell {
    Shell { config }
}

/// Arguments of `shell`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ShellArgs {
    /// The command line, run with `sh -c` in the workspace root.
    pub command: String,
}

#[async_trait]
impl Tool for Shell {
    type Args = ShellArgs;
    type Output = String;

    fn name(&self) -> &str {
        "shell"
    }

    fn description(&self) -> &str {
        "Run a shell command (sh -c) in the workspace root. Returns the exit code, stdout and \
         stderr (long output is cut in the middle). Long-running commands are killed after a \
         timeout. Only a few environment variables (PATH, HOME, LANG and configured ones) are \
         set."
    }

    fn timeout(&self) -> Option<Duration> {
        // The tool enforces its own timeout with a clearer message; the registry's is a backstop.
        Some(self.config.timeout + Duration::from_secs(5))
    }

    async fn call(&self, ctx: &ToolContext, args: ShellArgs) -> Result<String, ToolError> {
        if args.command.trim().is_empty() {
            return Err(ToolError::respond(
                "command is empty; give a shell command line to run",
            ));
        }
        let mut command = tokio::process::Command::new(&self.config.shell);
        command
            .arg("-c")
            .arg(&args.command)
            .current_dir(&ctx.root)
            .env_clear()
            .envs(self.passed_env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Dropping the future (timeout, cancellation) must not leave the process running.
            .kill_on_drop(true);
        // A process group of its own, so that a timeout also ends what the command started,
        // and one that dies with troupe (SIGKILL included).
        let mut group = CommandGroup::start();
        group.adopt(&mut command);
        let mut child = command.spawn().map_err(|e| {
            ToolError::fatal(format!("cannot start {}: {e}", self.config.shell.display()))
        })?;
        group.started(&child);
        let cap = self.config.max_output_bytes;
        // Both pipes are drained while the command runs, into buffers that never grow past the
        // cap: a command printing gigabytes neither blocks on a full pipe nor fills memory.
        let run = async {
            let (stdout, stderr, status) = tokio::join!(
                CappedOutput::new(cap).drain(child.stdout.take()),
                CappedOutput::new(cap).drain(child.stderr.take()),
                child.wait(),
            );
            status.map(|status| (stdout, stderr, status))
        };
        let (stdout, stderr, status) = match tokio::time::timeout(self.config.timeout, run).await {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => {
                return Err(ToolError::respond(format!(
                    "the command failed to run: {e}"
                )));
            }
            Err(_) => {
                return Err(ToolError::respond(format!(
                    "the command did not finish within {} s and was killed; run something \
                     shorter, or in the background with its output sent to a file",
                    self.config.timeout.as_secs_f64()
                )));
            }
        };
        // Finished in time: what it left running in the background is its business.
        group.release();
        let status = match status.code() {
            Some(code) => format!("exit code: {code}"),
            None => "killed by a signal".to_string(),
        };
        Ok(format!(
            "{status}\n[stdout]\n{}\n[stderr]\n{}",
            stdout.finish(),
            stderr.finish()
        ))
    }
}

impl Shell {
    /// The variables the command gets: [`BASE_ENV`] and the configured ones that troupe has.
    fn passed_env(&self) -> Vec<(String, std::ffi::OsString)> {
        BASE_ENV
            .iter()
            .copied()
            .chain(self.config.env_allowlist.iter().map(String::as_str))
            // A credential the `troupe` binary moved out of its environment is still passed.
            .filter_map(|name| {
                troupe_host::credentials::var_os(name).map(|value| (name.to_string(), value))
            })
            .collect()
    }
}
