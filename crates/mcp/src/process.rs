//! A stdio server's process: started in a process group of its own, with a clean environment,
//! and killed — with everything it started — when troupe lets go of it.
//!
//! rmcp's own child-process transport kills the child from a task it spawns on drop: a task
//! that never runs while the runtime shuts down (troupe exiting), and that reaches only the
//! direct child, not the `node` an `npx` started or the worker a Python server forked. Here the
//! kill is a synchronous `kill(-pgid, SIGKILL)` in `Drop`, which needs no runtime.

use std::process::Stdio;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use crate::config::McpServerConfig;
use crate::error::McpError;

/// The variables a server inherits from troupe (as MCP's reference SDKs do): enough to find
/// programs and a home, never the API keys troupe itself may hold. `env` adds the rest.
const INHERITED_ENV: &[&str] = &[
    "PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR",
];

/// A running server process; dropping it kills its process group.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Child,
    /// Its pid, which is also its process group's id.
    pid: Option<u32>,
}

/// A started process's pipes.
pub(crate) struct Pipes {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: Option<ChildStderr>,
}

impl ServerProcess {
    /// Start `config`'s command with its arguments, environment and directory, stdio piped.
    pub(crate) fn spawn(name: &str, config: &McpServerConfig) -> Result<(Self, Pipes), McpError> {
        if let Some(dir) = &config.cwd
            && !dir.is_dir()
        {
            // Spawning would fail with ENOENT, which reads as if the program were missing.
            let reason = if dir.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            return Err(McpError::Cwd {
                server: name.to_string(),
                cwd: dir.clone(),
                reason,
            });
        }
        let mut command = tokio::process::Command::new(&config.command);
        command.args(&config.args).env_clear();
        for name in INHERITED_ENV {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(&config.env);
        if let Some(dir) = &config.cwd {
            command.current_dir(dir);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Its own group: everything it starts can be killed with it, and a Ctrl-C meant for
        // troupe's terminal does not reach it.
        #[cfg(unix)]
        command.process_group(0);
        let spawn_error = |cause| McpError::Spawn {
            server: name.to_string(),
            command: config.command_line(),
            cause,
        };
        let mut child = command.spawn().map_err(spawn_error)?;
        let pid = child.id();
        let pipes = match (child.stdin.take(), child.stdout.take()) {
            (Some(stdin), Some(stdout)) => Pipes {
                stdin,
                stdout,
                stderr: child.stderr.take(),
            },
            _ => {
                drop(ServerProcess { child, pid });
                return Err(spawn_error(std::io::Error::other(
                    "its stdio was not piped",
                )));
            }
        };
        Ok((ServerProcess { child, pid }, pipes))
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(group) = self
            .pid
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            // ESRCH (the group is gone already) is the normal case for a server that exited.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        // The direct child, also where process groups are not available; tokio reaps it.
        let _ = self.child.start_kill();
    }
}
