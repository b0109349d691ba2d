//! What this kernel offers the sandbox, probed once, and the one check every confining policy
//! passes before a command starts ([`missing`]).

use std::sync::OnceLock;

/// The Landlock ABI a confining policy needs: 6 (Linux 6.12), for file rights including
/// truncation (3), reparenting checks (2), and the scoping of signals and abstract unix sockets
/// to the sandbox (6).
pub const NEEDED_LANDLOCK_ABI: i32 = 6;

/// A test's knob, read once from troupe's own environment: the Landlock ABI is taken to be at
/// most this number (`0`: no Landlock), as on an older kernel. It can only lower what the
/// kernel offers, so it can only make a sandbox refuse to run, never run weaker; a command
/// cannot set it (it is troupe's environment, read before any command starts, and commands get
/// an environment of their own).
pub const LANDLOCK_ABI_AT_MOST_ENV: &str = "TROUPE_SANDBOX_LANDLOCK_ABI_AT_MOST";

/// Landlock as this kernel offers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Landlock {
    /// Built but not enabled at boot (EOPNOTSUPP).
    Disabled,
    /// Not in this kernel (ENOSYS).
    Absent,
    /// This ABI version.
    Abi(i32),
}

/// The kernel's Landlock, probed once, lowered by [`LANDLOCK_ABI_AT_MOST_ENV`].
pub(super) fn landlock() -> Landlock {
    static PROBED: OnceLock<Landlock> = OnceLock::new();
    *PROBED.get_or_init(|| {
        let at_most = std::env::var(LANDLOCK_ABI_AT_MOST_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<i32>().ok());
        lowered(probe(), at_most)
    })
}

/// `found` lowered to at most `at_most`: never raised.
fn lowered(found: Landlock, at_most: Option<i32>) -> Landlock {
    match (found, at_most) {
        (Landlock::Abi(abi), Some(limit)) if limit < abi => {
            if limit <= 0 {
                Landlock::Absent
            } else {
                Landlock::Abi(limit)
            }
        }
        (found, _) => found,
    }
}

fn probe() -> Landlock {
    match super::child::landlock_abi() {
        Ok(abi) => Landlock::Abi(abi),
        Err(errno) if errno == libc::EOPNOTSUPP => Landlock::Disabled,
        Err(_) => Landlock::Absent,
    }
}

/// What a confining policy needs that this system lacks, in words (`needs`, `found`); `None`
/// when it has everything.
pub(super) fn missing() -> Option<(&'static str, String)> {
    missing_from(landlock(), seccomp_arch())
}

/// Whether troupe has a seccomp program for this architecture.
fn seccomp_arch() -> bool {
    cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
}

/// The decision, from what was found.
fn missing_from(landlock: Landlock, seccomp: bool) -> Option<(&'static str, String)> {
    const NEEDS: &str = "Landlock ABI 6 (Linux 6.12 or later: file rights, and signals and \
                         abstract sockets scoped to the sandbox)";
    let found = match landlock {
        Landlock::Abi(abi) if abi >= NEEDED_LANDLOCK_ABI => None,
        Landlock::Abi(abi) => Some(format!(
            "this kernel's Landlock is ABI {abi}, which cannot keep a command from signalling \
             processes outside its sandbox"
        )),
        Landlock::Disabled => Some(
            "this kernel has Landlock but it is not enabled (add `landlock` to the `lsm=` boot \
             parameter)"
                .to_string(),
        ),
        Landlock::Absent => Some("this kernel has no Landlock".to_string()),
    };
    if let Some(found) = found {
        return Some((NEEDS, found));
    }
    (!seccomp).then(|| {
        (
            "a seccomp filter for this architecture",
            "troupe has one for x86_64 and aarch64 only".to_string(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knob_only_lowers_what_the_kernel_offers() {
        assert_eq!(lowered(Landlock::Abi(7), Some(0)), Landlock::Absent);
        assert_eq!(lowered(Landlock::Abi(7), Some(4)), Landlock::Abi(4));
        // Never raised: an older kernel stays what it is, an absent Landlock stays absent.
        assert_eq!(lowered(Landlock::Abi(4), Some(9)), Landlock::Abi(4));
        assert_eq!(lowered(Landlock::Absent, Some(9)), Landlock::Absent);
        assert_eq!(lowered(Landlock::Disabled, Some(7)), Landlock::Disabled);
        assert_eq!(lowered(Landlock::Abi(7), None), Landlock::Abi(7));
    }

    #[test]
    fn a_kernel_without_what_the_policy_needs_is_named() {
        assert_eq!(missing_from(Landlock::Abi(6), true), None);
        assert_eq!(missing_from(Landlock::Abi(7), true), None);
        let (needs, found) = missing_from(Landlock::Abi(4), true).unwrap();
        assert!(needs.contains("Landlock ABI 6"), "{needs}");
        assert!(found.contains("ABI 4"), "{found}");
        let (_, found) = missing_from(Landlock::Absent, true).unwrap();
        assert!(found.contains("no Landlock"), "{found}");
        let (_, found) = missing_from(Landlock::Disabled, true).unwrap();
        assert!(found.contains("lsm="), "{found}");
        let (needs, _) = missing_from(Landlock::Abi(7), false).unwrap();
        assert!(needs.contains("seccomp"), "{needs}");
    }
}
