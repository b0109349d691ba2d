//! `shell` (opt-in): run a command with `sh -c` in the workspace root, confined by the kernel
//! ([`crate::sandbox`]: `workspace-write` unless the user chose otherwise), with a timeout, an
//! allow-listed environment and output capped while it is read.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use troupe_protocol::trace::semconv;

use super::capped_output::CappedOutput;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::process_group::CommandGroup;
use crate::sandbox::Sandbox;
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
    /// What a command may touch (default `workspace-write`, network off); only the user
    /// chooses [`Sandbox::full`], never the model: no argument, variable or file changes it.
    pub sandbox: Sandbox,
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
            sandbox: Sandbox::default(),
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
/// The command runs in the workspace root under [`ShellConfig::sandbox`]: by default it writes
/// only beneath the root and its private `TMPDIR` (`.git` read-only), has no network, cannot
/// signal or trace troupe, and whatever it leaves running ends with the call. Where the kernel
/// cannot confine it, the tool refuses to run and says why (`full` runs it unconfined, as a
/// terminal would: only for agents you would trust with one).
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
         set. Commands run in a sandbox the user chose: a refusal (permission denied, \
         read-only file system, no network) is the sandbox, not a bug; ask the user instead of \
         working around it."
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
        let sandbox = &self.config.sandbox;
        tracing::Span::current().record(semconv::SANDBOX_POLICY, sandbox.policy.name());
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
        // The one place the command is confined: after its environment is set, before it
        // starts; a kernel that cannot give what the policy promises refuses here.
        let confinement = sandbox
            .confine(command.as_std_mut(), &ctx.root)
            .map_err(|e| ToolError::respond(e.to_string()))?;
        // A process group of its own, so that a timeout also ends what the command started,
        // and one that dies with troupe (SIGKILL included).
        let mut group = CommandGroup::start();
        group.adopt(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| match confinement.spawn_failure(&e) {
                Some(refused) => ToolError::respond(refused.to_string()),
                None => {
                    ToolError::fatal(format!("cannot start {}: {e}", self.config.shell.display()))
                }
            })?;
        group.started(&child);
        let cap = self.config.max_output_bytes;
        // Confined, nothing the command started outlives it: the group (which it cannot leave)
        // is killed as the shell exits, so a background child holding the pipes ends too.
        let ends_with_shell = confinement.policy().confines();
        let (stdout_pipe, stderr_pipe) = (child.stdout.take(), child.stderr.take());
        // Both pipes are drained while the command runs, into buffers that never grow past the
        // cap: a command printing gigabytes neither blocks on a full pipe nor fills memory.
        let run = async {
            let wait = async {
                let status = child.wait().await;
                if ends_with_shell {
                    group.kill();
                }
                status
            };
            let (stdout, stderr, status) = tokio::join!(
                CappedOutput::new(cap).drain(stdout_pipe),
                CappedOutput::new(cap).drain(stderr_pipe),
                wait,
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
        if ends_with_shell {
            drop(group);
        } else {
            // Unconfined and finished in time: what it left running is its business.
            group.release();
        }
        // The private temporary directory goes with the call.
        drop(confinement);
        let status = match status.code() {
            Some(code) => format!("exit code: {code}"),
            None => "killed by a signal".to_string(),
        };
        let (stdout, stderr) = (stdout.finish(), stderr.finish());
        let mut result = format!("{status}\n[stdout]\n{stdout}\n[stderr]\n{stderr}");
        // A refusal is the command's own error; one line says whose it is.
        if let Some(note) = sandbox.note_for(&format!("{stdout}\n{stderr}")) {
            result.push('\n');
            result.push_str(&note);
        }
        Ok(result)
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
