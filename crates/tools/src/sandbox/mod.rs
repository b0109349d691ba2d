//! The kernel's confinement of every command troupe starts on a model's behalf: the `shell`
//! tool's commands, and an MCP stdio server when its configuration asks for it.
//!
//! Approvals ([`crate::approval`]) decide whether a call runs; the sandbox decides what the
//! command can touch once it does. A model is hostile input: reading a command line cannot tell
//! what `python -c` or a script will do, so the kernel holds the line.
//!
//! # Policies
//!
//! - [`SandboxPolicy::ReadOnly`]: reads where [`Reads`] allows, writes nowhere (but `/dev/null`
//!   and its like).
//! - [`SandboxPolicy::WorkspaceWrite`], the default: writes under the workspace root, a private
//!   temporary directory (its `TMPDIR`, removed after the call) and [`Sandbox::writable`] only;
//!   `.git`, troupe's own files ([`protect`]) and [`Sandbox::read_only`] stay read-only beneath
//!   them.
//! - [`SandboxPolicy::Full`]: no confinement, what `shell` did before the sandbox. Only the user
//!   chooses it, in the configuration or in code: nothing a command can write, set or send
//!   weakens a policy (the policy is read from [`Sandbox`] alone, never from the environment or
//!   a file in the workspace).
//!
//! Under both confining policies the network is off unless [`Sandbox::network`] is set: no
//! socket of any family can be created (no TCP or UDP, no unix socket, abstract or by path);
//! only connected pairs (`socketpair`, stream or seqpacket) remain, which reach nothing outside.
//! A command cannot signal, `ptrace` or read the memory of a process outside its sandbox
//! (troupe included), cannot raise its limits (capabilities dropped, `no_new_privs`, so no
//! setuid program gains any), cannot leave its process group (`setsid` and `setpgid` refused),
//! and whatever it leaves running is killed when the call ends.
//!
//! # Where it is applied
//!
//! In one place ([`Sandbox::confine`]), between fork and exec of the command: everything is
//! built in the parent (the Landlock ruleset, the seccomp program, the paths to keep read-only,
//! the identity maps) and the child makes only raw system calls (`child.rs`, the crate's one
//! module with `unsafe`). The mechanisms are the kernel's own — Landlock for files, signals and
//! abstract sockets, seccomp for sockets and process groups, a user and mount namespace with
//! read-only bind mounts where a writable root holds something to keep read-only — so no helper
//! binary is needed.
//!
//! # Fail closed
//!
//! A confining policy needs Landlock ABI 6 (Linux 6.12: file rights with truncation, signal and
//! abstract-socket scoping) and, where something must stay read-only beneath a writable root,
//! user namespaces. Where the kernel lacks either, the command is not run and the error names
//! what is missing and how to choose `full` deliberately ([`SandboxError`]).

#[allow(unsafe_code)]
mod child;
mod confine;
mod kernel;
mod note;
mod private_tmp;
mod protected;
mod ruleset;
mod seccomp;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use confine::Confinement;
pub use kernel::{LANDLOCK_ABI_AT_MOST_ENV, NEEDED_LANDLOCK_ABI};
pub use protected::{protect, protected};

/// How much a command may do: one of three named policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxPolicy {
    /// Reads where the sandbox allows them, writes nowhere.
    ReadOnly,
    /// Writes under the workspace root and a private temporary directory only (`.git` and
    /// troupe's own files read-only); the default.
    #[default]
    WorkspaceWrite,
    /// No confinement: only by the user's explicit choice.
    Full,
}

impl SandboxPolicy {
    /// The policy's name as configurations, traces and messages write it.
    pub fn name(self) -> &'static str {
        match self {
            SandboxPolicy::ReadOnly => "read-only",
            SandboxPolicy::WorkspaceWrite => "workspace-write",
            SandboxPolicy::Full => "full",
        }
    }

    /// Whether commands under it are confined at all.
    pub fn confines(self) -> bool {
        self != SandboxPolicy::Full
    }
}

impl fmt::Display for SandboxPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SandboxPolicy {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        [
            SandboxPolicy::ReadOnly,
            SandboxPolicy::WorkspaceWrite,
            SandboxPolicy::Full,
        ]
        .into_iter()
        .find(|p| p.name() == name)
        .ok_or_else(|| {
            format!("unknown sandbox policy `{name}`: read-only, workspace-write or full")
        })
    }
}

/// Where a confined command may read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Reads {
    /// Anywhere the user may (the default): the sandbox limits writes, not reads.
    #[default]
    Anywhere,
    /// Only the system's directories ([`SYSTEM_READ_ROOTS`]), the workspace, the private
    /// temporary directory, the writable roots and these: secrets elsewhere (`~/.ssh`, the
    /// user's configuration with its keys) cannot be read.
    Limited(Vec<PathBuf>),
}

/// The directories a [`Reads::Limited`] sandbox reads besides the workspace: where programs,
/// their libraries and the system's configuration are, and the process's own view of itself.
pub const SYSTEM_READ_ROOTS: &[&str] = &[
    "/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/dev",
    "/proc", "/sys",
];

/// What a command troupe starts for a model may do ([`SandboxPolicy`] and its settings).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sandbox {
    /// The policy (default [`SandboxPolicy::WorkspaceWrite`]).
    pub policy: SandboxPolicy,
    /// Whether confined commands may use the network (default `false`: no socket but connected
    /// pairs). `http_get` keeps its own allow-list either way: it runs in troupe, not here.
    pub network: bool,
    /// Where confined commands may read (default anywhere).
    pub reads: Reads,
    /// Directories writable besides the workspace root and the private temporary directory
    /// (`workspace-write` only).
    pub writable: Vec<PathBuf>,
    /// Paths kept read-only beneath the writable roots, besides each root's `.git` and the
    /// process's [`protected`] files.
    pub read_only: Vec<PathBuf>,
}

impl Sandbox {
    /// No confinement ([`SandboxPolicy::Full`]).
    pub fn full() -> Self {
        Sandbox::with_policy(SandboxPolicy::Full)
    }

    /// Reads only ([`SandboxPolicy::ReadOnly`]), network off.
    pub fn read_only() -> Self {
        Sandbox::with_policy(SandboxPolicy::ReadOnly)
    }

    /// The default: writes under the workspace only, network off.
    pub fn workspace_write() -> Self {
        Sandbox::default()
    }

    /// `policy` with the default settings.
    pub fn with_policy(policy: SandboxPolicy) -> Self {
        Sandbox {
            policy,
            ..Sandbox::default()
        }
    }

    /// The policy as a status line shows it: `workspace-write, network off`.
    pub fn describe(&self) -> String {
        if !self.policy.confines() {
            return "full (not confined)".to_string();
        }
        let network = if self.network {
            "network on"
        } else {
            "network off"
        };
        let reads = match self.reads {
            Reads::Anywhere => "",
            Reads::Limited(_) => ", reads limited",
        };
        format!("{}, {network}{reads}", self.policy)
    }

    /// Whether this kernel gives what the policy promises; an error names what it lacks and
    /// how to choose `full` deliberately. `full` always passes.
    ///
    /// # Errors
    /// [`SandboxError::Unsupported`].
    pub fn check(&self) -> Result<(), SandboxError> {
        if !self.policy.confines() {
            return Ok(());
        }
        match kernel::missing() {
            Some((needs, found)) => Err(SandboxError::Unsupported {
                policy: self.policy,
                needs,
                found,
            }),
            None => Ok(()),
        }
    }
}

/// How a user chooses to run commands unconfined; every refusal ends with it.
pub const CHOOSE_FULL: &str = "to run commands unconfined, the user can choose it deliberately: \
     `[sandbox] policy = \"full\"` in the configuration, or `Sandbox::full()` in `ShellConfig`";

/// Why a command was not run under its sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel lacks what the policy needs.
    #[error(
        "the sandbox ({policy}) needs {needs}, which this system does not offer: {found}; the \
         command was not run ({CHOOSE_FULL})"
    )]
    Unsupported {
        /// The policy in force.
        policy: SandboxPolicy,
        /// What it needs.
        needs: &'static str,
        /// What the system has instead.
        found: String,
    },
    /// A step of setting the sandbox up failed.
    #[error(
        "the sandbox ({policy}) could not be set up: {step}: {cause}; the command was not run \
         ({CHOOSE_FULL})"
    )]
    Setup {
        /// The policy in force.
        policy: SandboxPolicy,
        /// What failed, in words.
        step: String,
        /// The system's error.
        cause: String,
    },
}

impl SandboxError {
    /// The policy the refused command was to run under.
    pub fn policy(&self) -> SandboxPolicy {
        match self {
            SandboxError::Unsupported { policy, .. } | SandboxError::Setup { policy, .. } => {
                *policy
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_read_back_from_their_names_and_nothing_else() {
        for policy in [
            SandboxPolicy::ReadOnly,
            SandboxPolicy::WorkspaceWrite,
            SandboxPolicy::Full,
        ] {
            assert_eq!(policy.name().parse::<SandboxPolicy>(), Ok(policy));
        }
        let e = "off".parse::<SandboxPolicy>().unwrap_err();
        assert!(e.contains("read-only, workspace-write or full"), "{e}");
        assert_eq!(SandboxPolicy::default(), SandboxPolicy::WorkspaceWrite);
        assert!(!SandboxPolicy::Full.confines());
    }

    #[test]
    fn full_is_never_the_default_and_always_passes_the_check() {
        assert_eq!(Sandbox::default().policy, SandboxPolicy::WorkspaceWrite);
        assert!(!Sandbox::default().network);
        assert!(Sandbox::full().check().is_ok());
        assert_eq!(Sandbox::full().describe(), "full (not confined)");
        assert_eq!(
            Sandbox::default().describe(),
            "workspace-write, network off"
        );
    }
}
