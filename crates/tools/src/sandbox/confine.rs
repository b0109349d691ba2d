//! [`Sandbox::confine`]: the one place a command is confined. The parent side: the paths, the
//! ruleset, the program and the maps, handed to `child.rs` to apply between fork and exec.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::child::{self, ChildPlan, Namespace, Step};
use super::private_tmp::PrivateTmp;
use super::ruleset::{self, Rules};
use super::{Reads, SYSTEM_READ_ROOTS, Sandbox, SandboxError, SandboxPolicy, protected, seccomp};

/// A confined command's side of the sandbox, kept until the command ends: its private
/// temporary directory (removed when this is dropped) and what tells a failed set-up's step.
#[derive(Debug)]
pub struct Confinement {
    policy: SandboxPolicy,
    tmp: Option<PrivateTmp>,
    /// The read end of the pipe a failed step's number comes back on.
    failure: Option<OwnedFd>,
}

impl Confinement {
    /// The policy the command runs under.
    pub fn policy(&self) -> SandboxPolicy {
        self.policy
    }

    /// The command's private temporary directory (its `TMPDIR`), under `workspace-write`.
    pub fn temp_dir(&self) -> Option<&Path> {
        self.tmp.as_ref().map(PrivateTmp::path)
    }

    /// What a failed spawn of the confined command means: the sandbox step that failed, or
    /// `None` when the failure is not the sandbox's (the program is missing, …).
    pub fn spawn_failure(&self, error: &std::io::Error) -> Option<SandboxError> {
        let failure = self.failure.as_ref()?;
        let mut byte = [0u8; 1];
        match rustix::io::read(failure, &mut byte) {
            Ok(1) => Step::from_byte(byte[0]).map(|step| SandboxError::Setup {
                policy: self.policy,
                step: step.describe().to_string(),
                cause: error.to_string(),
            }),
            _ => None,
        }
    }
}

impl Sandbox {
    /// Confine `command`, to run with `root` as its workspace: call it once the command's
    /// environment is set (it sets `TMPDIR` under `workspace-write`), spawn the command, and
    /// keep the [`Confinement`] until the command ends. Under `full` nothing changes.
    ///
    /// # Errors
    /// [`SandboxError::Unsupported`] where the kernel lacks what the policy needs;
    /// [`SandboxError::Setup`] when the root, the temporary directory or the ruleset cannot be
    /// made. Either way the command must not be run.
    pub fn confine(
        &self,
        command: &mut std::process::Command,
        root: &Path,
    ) -> Result<Confinement, SandboxError> {
        if !self.policy.confines() {
            return Ok(Confinement {
                policy: self.policy,
                tmp: None,
                failure: None,
            });
        }
        self.check()?;
        let setup = |step: String, cause: std::io::Error| SandboxError::Setup {
            policy: self.policy,
            step,
            cause: cause.to_string(),
        };
        let root = root
            .canonicalize()
            .map_err(|e| setup(format!("opening the workspace root {}", root.display()), e))?;
        let tmp = match self.policy {
            SandboxPolicy::WorkspaceWrite => Some(
                PrivateTmp::create()
                    .map_err(|e| setup("creating the private temporary directory".into(), e))?,
            ),
            _ => None,
        };
        let write: Vec<PathBuf> = match self.policy {
            SandboxPolicy::WorkspaceWrite => std::iter::once(root.clone())
                .chain(tmp.iter().map(|t| t.path().to_path_buf()))
                .chain(existing(&self.writable))
                .collect(),
            _ => Vec::new(),
        };
        let read: Vec<PathBuf> = match &self.reads {
            Reads::Anywhere => vec![PathBuf::from("/")],
            Reads::Limited(extra) => SYSTEM_READ_ROOTS
                .iter()
                .map(PathBuf::from)
                .chain(std::iter::once(root.clone()))
                .chain(existing(extra))
                .collect(),
        };
        let kept = kept_read_only(&write, self.read_only.iter().cloned().chain(protected()));
        let ruleset = ruleset::build(&Rules {
            read: &read,
            write: &write,
            network: self.network,
        })
        .map_err(|cause| SandboxError::Setup {
            policy: self.policy,
            step: "building the Landlock ruleset".into(),
            cause,
        })?;
        let (reader, writer) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )
        .map_err(|e| setup("making the set-up's pipe".into(), e.into()))?;
        let filter = seccomp::program(self.network);
        let plan = ChildPlan {
            namespace: namespace(&kept),
            ruleset,
            filter_len: u16::try_from(filter.len()).unwrap_or(u16::MAX),
            filter,
            drop_bounding: rustix::process::geteuid().is_root(),
            failure: writer,
        };
        child::install(command, plan);
        if let Some(tmp) = &tmp {
            command.env("TMPDIR", tmp.path());
        }
        Ok(Confinement {
            policy: self.policy,
            tmp,
            failure: Some(reader),
        })
    }
}

/// The canonical form of each path that exists.
fn existing(paths: &[PathBuf]) -> impl Iterator<Item = PathBuf> + '_ {
    paths.iter().filter_map(|p| p.canonicalize().ok())
}

/// What must be bound read-only: each writable root's `.git` and each `asked` path, as they
/// resolve, where they lie beneath a writable root (elsewhere they are read-only already); a
/// path beneath another kept one is covered by its mount.
fn kept_read_only(writable: &[PathBuf], asked: impl Iterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut kept: Vec<PathBuf> = writable
        .iter()
        .map(|root| root.join(".git"))
        .chain(asked)
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| writable.iter().any(|root| p.starts_with(root)))
        .collect();
    kept.sort();
    kept.dedup();
    let covered = |p: &PathBuf| kept.iter().any(|q| q != p && p.starts_with(q));
    kept.iter().filter(|p| !covered(p)).cloned().collect()
}

/// The namespace step for `kept`, when there is anything to keep.
fn namespace(kept: &[PathBuf]) -> Option<Namespace> {
    if kept.is_empty() {
        return None;
    }
    let uid = rustix::process::geteuid();
    let gid = rustix::process::getegid().as_raw();
    // Root opens its own /proc files whatever their owner; anyone else needs them its own.
    let dumpable_for_maps = !uid.is_root()
        && rustix::process::dumpable_behavior()
            .is_ok_and(|d| d != rustix::process::DumpableBehavior::Dumpable);
    let uid = uid.as_raw();
    Some(Namespace {
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        dumpable_for_maps,
        read_only: kept
            .iter()
            .filter_map(|p| CString::new(p.as_os_str().as_bytes()).ok())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_and_asked_paths_beneath_a_writable_root_are_kept_and_others_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("ws");
        let outside = dir.path().canonicalize().unwrap().join("outside");
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("session.jsonl"), "").unwrap();
        std::fs::write(outside.join("session.jsonl"), "").unwrap();
        std::os::unix::fs::symlink(root.join("session.jsonl"), root.join("link.jsonl")).unwrap();
        let kept = kept_read_only(
            std::slice::from_ref(&root),
            [
                root.join("session.jsonl"),
                // Resolved: the link's target, once.
                root.join("link.jsonl"),
                // Covered by .git's mount.
                root.join(".git/hooks"),
                // Read-only already.
                outside.join("session.jsonl"),
                // Nothing to bind yet.
                root.join("missing.jsonl"),
            ]
            .into_iter(),
        );
        assert_eq!(kept, vec![root.join(".git"), root.join("session.jsonl")]);
        // Nothing to keep, no namespace.
        assert!(namespace(&[]).is_none());
        let ns = namespace(&kept).unwrap();
        assert_eq!(ns.read_only.len(), 2);
        assert!(String::from_utf8(ns.uid_map).unwrap().ends_with(" 1\n"));
    }
}
