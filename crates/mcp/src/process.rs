//! A stdio server's process: started in a process group that dies with troupe, with a clean
//! environment, and killed — with everything it started — when troupe lets go of it.
//!
//! rmcp's own child-process transport kills the child from a task it spawns on drop: a task
//! that never runs while the runtime shuts down (troupe exiting), and that reaches only the
//! direct child, not the `node` an `npx` started or the worker a Python server forked. Here the
//! server joins a [`CommandGroup`], the same one a tool's command runs in: dropping it is a
//! synchronous `kill(-pgid, SIGKILL)`, which needs no runtime, and troupe's end by any road (a
//! signal, an exit whose runtime never dropped the task that held the server, SIGKILL) ends the
//! group through its watchman.

use std::process::Stdio;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use troupe_tools::process_group::CommandGroup;
use troupe_tools::sandbox::Confinement;

use crate::config::McpServerConfig;
use crate::error::McpError;

/// The variables a server inherits from troupe (as MCP's reference SDKs do): enough to find
/// programs and a home, never the API keys troupe itself may hold. `env` adds the rest.
const INHERITED_ENV: &[&str] = &[
    "PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR",
];

/// A running server process; dropping it kills its process group. No `Drop` of its own: its
/// fields do it, in order — `_child` (spawned `kill_on_drop`: the direct child, synchronously;
/// tokio reaps it), then `_group` (the whole group, ESRCH when it is gone already).
#[derive(Debug)]
pub(crate) struct ServerProcess {
    _child: Child,
    /// Its pid.
    pid: Option<u32>,
    /// The group it runs in, killed when this is dropped or troupe ends.
    _group: CommandGroup,
    /// Its sandbox's side, kept while it runs (its private temporary directory with it).
    _confinement: Option<Confinement>,
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
        // A group that dies with troupe: everything it starts can be killed with it, and a
        // Ctrl-C meant for troupe's terminal does not reach it.
        let mut group = CommandGroup::start();
        group.adopt(&mut command);
        // Confined where asked, in the one place commands are (troupe_tools::sandbox), with
        // its working directory as the workspace.
        let sandbox_error = |cause| McpError::Sandbox {
            server: name.to_string(),
            cause,
        };
        let confinement = match &config.sandbox {
            Some(sandbox) => {
                let root = match &config.cwd {
                    Some(dir) => dir.clone(),
                    None => std::env::current_dir().unwrap_or_else(|_| ".".into()),
                };
                Some(
                    sandbox
                        .confine(command.as_std_mut(), &root)
                        .map_err(sandbox_error)?,
                )
            }
            None => None,
        };
        let mut child = command.spawn().map_err(|cause| {
            match confinement.as_ref().and_then(|c| c.spawn_failure(&cause)) {
                Some(refused) => sandbox_error(refused),
                None => McpError::Spawn {
                    server: name.to_string(),
                    command: config.command_line(),
                    cause,
                },
            }
        })?;
        group.started(&child);
        let pid = child.id();
        let pipes = match (child.stdin.take(), child.stdout.take()) {
            (Some(stdin), Some(stdout)) => Pipes {
                stdin,
                stdout,
                stderr: child.stderr.take(),
            },
            _ => {
                drop(ServerProcess {
                    _child: child,
                    pid,
                    _group: group,
                    _confinement: confinement,
                });
                return Err(McpError::Spawn {
                    server: name.to_string(),
                    command: config.command_line(),
                    cause: std::io::Error::other("its stdio was not piped"),
                });
            }
        };
        Ok((
            ServerProcess {
                _child: child,
                pid,
                _group: group,
                _confinement: confinement,
            },
            pipes,
        ))
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }
}
