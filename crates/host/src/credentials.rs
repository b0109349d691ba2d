//! Credentials that were read from the environment, held in the process instead of in its
//! environment.
//!
//! A program's environment is readable by others: every child inherits it unless told
//! otherwise, and any process of the same user can read `/proc/PID/environ`. The `troupe`
//! binary therefore moves its credentials (API keys, the cluster cookie) out of the environment
//! as it starts, before any thread runs, into this store ([`keep`]); code that needs one reads
//! it with [`var`] or [`var_os`], which look here first and in the environment second, so a
//! library user who never moved anything is served as before.
//!
//! Removing a variable does not erase the copy the kernel shows as `/proc/PID/environ` (the
//! block the process started with): [`erase_from_initial_environ`] overwrites it, and
//! [`forbid_inspection`] makes the process non-dumpable, so that processes of the same user
//! (the shell tool's commands, MCP servers) can read neither its environment nor its memory.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::sync::{LazyLock, RwLock};

use troupe_protocol::sync::{read, write};

/// The credentials moved out of the environment, by variable name.
static STORE: LazyLock<RwLock<BTreeMap<OsString, OsString>>> =
    LazyLock::new(|| RwLock::new(BTreeMap::new()));

/// Hold `value` as the credential `name` (an environment variable's name), for [`var_os`].
pub fn keep(name: impl Into<OsString>, value: impl Into<OsString>) {
    write(&STORE).insert(name.into(), value.into());
}

/// The credential `name`: the value [`keep`] holds for it, else the environment variable.
pub fn var_os(name: impl AsRef<OsStr>) -> Option<OsString> {
    let name = name.as_ref();
    let kept = read(&STORE).get(name).cloned();
    kept.or_else(|| std::env::var_os(name))
}

/// [`var_os`] as a string; `None` when it is unset or not Unicode.
pub fn var(name: impl AsRef<OsStr>) -> Option<String> {
    var_os(name).and_then(|value| value.into_string().ok())
}

/// Make this process non-dumpable (Linux's `PR_SET_DUMPABLE` 0): processes of the same user can
/// no longer read its `/proc/PID/environ` or `/proc/PID/mem`, attach a debugger to it, or get a
/// core dump of it. Children are not affected (`execve` resets the flag). Elsewhere, nothing.
///
/// # Errors
/// The `prctl` error, if the kernel refuses.
pub fn forbid_inspection() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

/// Overwrite, with zero bytes, the entries `NAME=value` of `names` in the environment block this
/// process started with — the text the kernel shows as `/proc/PID/environ`, which removing a
/// variable leaves in place. Call it only after the variables were removed from the environment
/// (`std::env::remove_var`): then nothing in the process refers to those bytes any more. On
/// systems other than Linux, nothing.
///
/// # Errors
/// When `/proc/self/stat` or `/proc/self/mem` cannot be read or written.
pub fn erase_from_initial_environ(names: &[OsString]) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    initial_environ::erase(names)?;
    #[cfg(not(target_os = "linux"))]
    let _ = names;
    Ok(())
}

#[cfg(target_os = "linux")]
mod initial_environ {
    use std::ffi::OsString;
    use std::fs::OpenOptions;
    use std::io::{Error, ErrorKind, Result};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileExt;

    /// Where the initial environment block lies: fields 50 and 51 of `/proc/self/stat`
    /// (`env_start`, `env_end`; proc(5)).
    fn block() -> Result<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/self/stat")?;
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let field = |n: usize| {
            fields
                .get(n - 3)
                .and_then(|f| f.parse::<u64>().ok())
                .ok_or_else(|| Error::new(ErrorKind::InvalidData, "no env_start/env_end"))
        };
        let (start, end) = (field(50)?, field(51)?);
        if end <= start {
            return Err(Error::new(
                ErrorKind::InvalidData,
                "empty env_start..env_end",
            ));
        }
        Ok((start, end))
    }

    /// See [`super::erase_from_initial_environ`]. The block is read and written through
    /// `/proc/self/mem`, the kernel's view of this process's memory, by file offset.
    pub(super) fn erase(names: &[OsString]) -> Result<()> {
        if names.is_empty() {
            return Ok(());
        }
        let (start, end) = block()?;
        let length = usize::try_from(end.saturating_sub(start))
            .map_err(|e| Error::new(ErrorKind::InvalidData, e))?;
        let mem = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/proc/self/mem")?;
        let mut environ = vec![0u8; length];
        mem.read_exact_at(&mut environ, start)?;
        let mut offset = 0u64;
        for entry in environ.split(|&b| b == 0) {
            let name = entry.split(|&b| b == b'=').next().unwrap_or_default();
            if entry.contains(&b'=') && names.iter().any(|n| n.as_bytes() == name) {
                mem.write_all_at(&vec![0u8; entry.len()], start + offset)?;
            }
            offset += entry.len() as u64 + 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_credential_wins_over_the_environment_and_the_environment_is_the_fallback() {
        keep("TROUPE_CREDENTIALS_TEST_KEY", "kept-value");
        assert_eq!(
            var("TROUPE_CREDENTIALS_TEST_KEY").as_deref(),
            Some("kept-value")
        );
        // Not kept: read from the environment (PATH is set wherever tests run).
        assert_eq!(var_os("PATH"), std::env::var_os("PATH"));
        assert_eq!(var("TROUPE_CREDENTIALS_TEST_UNSET"), None);
    }
}
