//! A process group for a command troupe starts (a tool's command, an MCP stdio server) that dies
//! with troupe: on a timeout or a cancelled call (dropped armed), and also when troupe itself
//! ends — SIGKILL included, and an exit that never drops the task holding the group (a runtime
//! shut down with tasks still running), where no `Drop` runs.
//!
//! How the last works without `unsafe` (`PR_SET_PDEATHSIG` needs a `pre_exec` hook): the group
//! is led by a watchman, `sh -c 'read -r _; kill -9 0'`, whose stdin is a pipe only troupe
//! holds (close-on-exec, so no other child inherits it). The command joins the watchman's
//! group. When troupe dies the kernel closes the pipe, `read` sees the end of its input and
//! `kill -9 0` ends the whole group. A command that finished in time is left alone: the
//! watchman is killed on its own (before its pipe closes), and what the command started in the
//! background goes on.

use std::process::Stdio;

/// The watchman's shell: a fixed path, not the tool's configured shell (which may be anything).
const WATCHMAN_SHELL: &str = "/bin/sh";

/// A command's process group and the watchman that leads it.
#[derive(Debug)]
pub struct CommandGroup {
    /// The group's id (the watchman's pid); `None` where there is no watchman.
    pgid: Option<u32>,
    /// Held for its stdin: closing that (troupe's death) is the watchman's signal.
    watchman: Option<tokio::process::Child>,
}

impl CommandGroup {
    /// Start a watchman. Where one cannot be started (no `/bin/sh`), the command gets a group
    /// of its own as before, which a timeout still ends but troupe's death does not.
    pub fn start() -> Self {
        let mut watchman = tokio::process::Command::new(WATCHMAN_SHELL);
        watchman
            .args(["-c", "read -r _; kill -9 0"])
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        // Its own group, which the command joins: a Ctrl-C at troupe's terminal reaches
        // neither.
        #[cfg(unix)]
        watchman.process_group(0);
        match watchman.spawn() {
            Ok(child) => CommandGroup {
                pgid: child.id(),
                watchman: Some(child),
            },
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "cannot start {WATCHMAN_SHELL} to watch a tool's command: the command will \
                     outlive troupe if troupe is killed while it runs"
                );
                CommandGroup {
                    pgid: None,
                    watchman: None,
                }
            }
        }
    }

    /// Put `command` in the group (a group of its own when there is no watchman).
    pub fn adopt(&self, command: &mut tokio::process::Command) {
        #[cfg(unix)]
        command.process_group(self.pgid.and_then(|p| i32::try_from(p).ok()).unwrap_or(0));
    }

    /// The command was started as `child`: the group to kill is its own when it has no
    /// watchman.
    pub fn started(&mut self, child: &tokio::process::Child) {
        if self.pgid.is_none() {
            self.pgid = child.id();
        }
    }

    /// The command finished in time: stop watching, and leave what it started in the background
    /// running.
    pub fn release(mut self) {
        self.pgid = None;
        if let Some(mut watchman) = self.watchman.take() {
            // Killed before its stdin closes (the drop after this), so it never reads the end
            // of its input.
            let _ = watchman.start_kill();
        }
    }
}

impl CommandGroup {
    /// Kill the whole group now, watchman included (a confined command's end: nothing it
    /// started outlives the call). The group stays armed: dropping it kills again, harmlessly.
    pub fn kill(&self) {
        #[cfg(unix)]
        if let Some(group) = self
            .pgid
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            // ESRCH (the group is gone already) is fine.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for CommandGroup {
    /// Dropped armed (a timeout, a cancelled call): the whole group goes, watchman included.
    fn drop(&mut self) {
        self.kill();
    }
}
