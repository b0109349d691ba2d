//! The Landlock ruleset a confined command runs under, built in the parent (the `landlock`
//! crate opens the paths and makes the rules); the child only enforces it on itself.
//!
//! Every file right of ABI 6 is handled, so what no rule grants is refused: reads beneath the
//! read roots, everything beneath the writable roots, and reading and writing the harmless
//! devices. Rights attach to inodes, not names, so a symbolic link, `..`, `/proc/self/root` or
//! a second name of a directory all lead to the same verdict; a hard link or rename that would
//! give a file more rights than it has is refused (the reparenting rule, ABI 2). Signals and
//! abstract unix sockets are scoped to the sandbox (ABI 6): a command can signal or reach only
//! processes confined with it, and Landlock's own `ptrace` rule keeps it from tracing any other.
//! With the network off, TCP bind and connect are handled too, a second wall behind seccomp.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

/// The ABI whose rights the ruleset names; older kernels are refused before this runs
/// (`kernel.rs`), and the ruleset is built as a hard requirement all the same.
const ABI_USED: ABI = ABI::V6;

/// Devices every confined command may read and write (`> /dev/null`).
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// What the ruleset allows.
pub(super) struct Rules<'a> {
    /// Readable beneath these (every existing one).
    pub(super) read: &'a [PathBuf],
    /// Readable and writable beneath these.
    pub(super) write: &'a [PathBuf],
    /// Whether TCP is left to the network setting (`true`) or handled (refused).
    pub(super) network: bool,
}

/// The ruleset's descriptor, ready for `landlock_restrict_self`.
pub(super) fn build(rules: &Rules<'_>) -> Result<OwnedFd, String> {
    let all = AccessFs::from_all(ABI_USED);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .and_then(|r| r.scope(Scope::from_all(ABI_USED)))
        .map_err(|e| e.to_string())?;
    if !rules.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI_USED))
            .map_err(|e| e.to_string())?;
    }
    let mut created = ruleset.create().map_err(|e| e.to_string())?;
    let read = AccessFs::from_read(ABI_USED);
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let grants = rules
        .read
        .iter()
        .map(|p| (p.as_path(), read))
        .chain(rules.write.iter().map(|p| (p.as_path(), all)))
        .chain(DEVICES.iter().map(|d| (Path::new(*d), device)));
    for (path, access) in grants {
        let Some(rule) = rule(path, access) else {
            continue;
        };
        created = created.add_rule(rule).map_err(|e| e.to_string())?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| "the kernel made no ruleset".to_string())
}

/// A rule granting `access` beneath `path` (only the rights a file can have, for a file);
/// `None` when the path does not exist, which then grants nothing.
fn rule(path: &Path, access: BitFlags<AccessFs>) -> Option<PathBeneath<PathFd>> {
    let metadata = std::fs::metadata(path).ok()?;
    let access = if metadata.is_dir() {
        access
    } else {
        access & AccessFs::from_file(ABI_USED)
    };
    let fd = PathFd::new(path).ok()?;
    Some(PathBeneath::new(fd, access))
}
