//! The only code that runs in a command's process between fork and exec, and the one module of
//! troupe-tools allowed `unsafe` (ARCHITECTURE.md says why).
//!
//! The parent is multithreaded: after `fork` the child holds one thread, and any lock another
//! thread held (the allocator's included) stays held forever. So everything is built in the
//! parent ([`ChildPlan`]: the ruleset's descriptor, the seccomp program, the identity maps, the
//! paths as C strings) and the child only makes system calls through libc on that memory, in
//! this order: a user and mount namespace with read-only bind mounts (only when something must
//! stay read-only beneath a writable root), `no_new_privs`, Landlock, every capability dropped,
//! every descriptor but the standard three closed at exec (Landlock does not govern a file
//! opened before it, so none of troupe's may cross), seccomp last (it refuses calls the steps
//! before it make). A failed step writes its number to
//! the plan's pipe and fails the spawn with the step's errno, which the parent reads back.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// What the child does, built in the parent.
pub(super) struct ChildPlan {
    /// Set when paths must be kept read-only beneath a writable root.
    pub(super) namespace: Option<Namespace>,
    /// The Landlock ruleset (close-on-exec).
    pub(super) ruleset: OwnedFd,
    /// The seccomp program and its length.
    pub(super) filter: Vec<libc::sock_filter>,
    pub(super) filter_len: u16,
    /// Whether the bounding set must be emptied too (the command is root, whom `execve` would
    /// otherwise give every capability the set holds).
    pub(super) drop_bounding: bool,
    /// Where a failed step's number goes (close-on-exec, non-blocking).
    pub(super) failure: OwnedFd,
}

/// The namespace step: the identity maps' text and the paths to bind read-only onto themselves.
pub(super) struct Namespace {
    pub(super) uid_map: Vec<u8>,
    pub(super) gid_map: Vec<u8>,
    pub(super) read_only: Vec<CString>,
    /// Whether the child must be dumpable while it writes its maps: a non-dumpable process's
    /// `/proc/self` files belong to root, so a user other than root cannot open its own
    /// `uid_map` (troupe makes itself non-dumpable to keep its keys from the user's other
    /// processes; the child is made so again right after, and `execve` replaces its memory).
    pub(super) dumpable_for_maps: bool,
}

/// The steps, by the number the child reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    UserNamespace = 1,
    IdentityMap,
    ReadOnlyMount,
    NoNewPrivileges,
    Landlock,
    Capabilities,
    Descriptors,
    Seccomp,
}

impl Step {
    const ALL: [Step; 8] = [
        Step::UserNamespace,
        Step::IdentityMap,
        Step::ReadOnlyMount,
        Step::NoNewPrivileges,
        Step::Landlock,
        Step::Capabilities,
        Step::Descriptors,
        Step::Seccomp,
    ];

    pub(super) fn from_byte(byte: u8) -> Option<Step> {
        Step::ALL.into_iter().find(|s| *s as u8 == byte)
    }

    /// The step in words, for the error.
    pub(super) fn describe(self) -> &'static str {
        match self {
            Step::UserNamespace => {
                "creating a user and mount namespace, which keeps .git and troupe's own files \
                 read-only (the system may not allow unprivileged user namespaces)"
            }
            Step::IdentityMap => "mapping the command's user and group into its namespace",
            Step::ReadOnlyMount => "binding .git and troupe's own files read-only",
            Step::NoNewPrivileges => "setting no_new_privs",
            Step::Landlock => "enforcing the Landlock ruleset",
            Step::Capabilities => "dropping capabilities",
            Step::Descriptors => "closing troupe's descriptors at exec",
            Step::Seccomp => "installing the seccomp filter",
        }
    }
}

/// Have `command` apply `plan` to itself between fork and exec.
pub(super) fn install(command: &mut std::process::Command, plan: ChildPlan) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs in the forked child of a multithreaded parent, where only
    // async-signal-safe work is sound. `apply` makes system calls through libc on memory the
    // plan owns (built in the parent, moved into the closure, alive until the command is
    // dropped); it allocates nothing, takes no lock and has no path that panics.
    unsafe {
        command.pre_exec(move || apply(&plan));
    }
}

/// The Landlock ABI the kernel offers, or the errno of asking (EOPNOTSUPP: disabled; ENOSYS:
/// absent).
pub(super) fn landlock_abi() -> Result<i32, i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, a size of 0 and the version flag the call reads no memory;
    // it returns the ABI version or -1 with errno.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if version < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(i32::try_from(version).unwrap_or(i32::MAX))
    }
}

fn apply(plan: &ChildPlan) -> io::Result<()> {
    match confine(plan) {
        Ok(()) => Ok(()),
        Err((step, error)) => {
            let byte = [step as u8];
            // SAFETY: writes one byte from this frame to the plan's pipe, open in this process.
            // A failed write only loses the step's name; the spawn fails with `error` anyway.
            unsafe {
                libc::write(plan.failure.as_raw_fd(), byte.as_ptr().cast(), 1);
            }
            Err(error)
        }
    }
}

/// The steps, in order; the first to fail names itself.
fn confine(plan: &ChildPlan) -> Result<(), (Step, io::Error)> {
    if let Some(namespace) = &plan.namespace {
        // SAFETY: unshare takes flags only; the child is single-threaded, as a new user
        // namespace requires.
        check(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) })
            .map_err(at(Step::UserNamespace))?;
        identity_maps(namespace).map_err(at(Step::IdentityMap))?;
        for path in &namespace.read_only {
            bind_read_only(path).map_err(at(Step::ReadOnlyMount))?;
        }
    }
    let (one, zero): (libc::c_ulong, libc::c_ulong) = (1, 0);
    // SAFETY: prctl with integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, one, zero, zero, zero) })
        .map_err(at(Step::NoNewPrivileges))?;
    // SAFETY: the descriptor is the plan's ruleset, open until exec; flags 0.
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            plan.ruleset.as_raw_fd(),
            0 as libc::c_uint,
        )
    })
    .map_err(at(Step::Landlock))?;
    drop_capabilities(plan.drop_bounding).map_err(at(Step::Capabilities))?;
    // SAFETY: close_range with integer arguments only: marks every descriptor from 3 up
    // close-on-exec (the standard three stay the command's).
    check(unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    })
    .map_err(at(Step::Descriptors))?;
    let program = libc::sock_fprog {
        len: plan.filter_len,
        filter: plan.filter.as_ptr().cast_mut(),
    };
    // SAFETY: `program` points at the plan's instructions (`filter_len` of them), alive for
    // this call; the kernel copies them and writes nothing.
    check(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0 as libc::c_uint,
            &program as *const libc::sock_fprog,
        )
    })
    .map_err(at(Step::Seccomp))?;
    Ok(())
}

/// The namespace's identity maps, written by the child itself; dumpable only while it writes
/// them when [`Namespace::dumpable_for_maps`] says so (the window is these three writes: the
/// process holds troupe's memory until `execve`, and no other process may read it).
fn identity_maps(namespace: &Namespace) -> io::Result<()> {
    let set_dumpable = |on: libc::c_ulong| {
        let zero: libc::c_ulong = 0;
        // SAFETY: prctl with integer arguments only.
        check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, on, zero, zero, zero) })
    };
    if namespace.dumpable_for_maps {
        set_dumpable(1)?;
    }
    let written = write_file(c"/proc/self/setgroups", b"deny")
        .and_then(|()| write_file(c"/proc/self/uid_map", &namespace.uid_map))
        .and_then(|()| write_file(c"/proc/self/gid_map", &namespace.gid_map));
    if namespace.dumpable_for_maps {
        set_dumpable(0)?;
    }
    written
}

/// `path` bound read-only onto itself, submounts included (the new mount API: it sets
/// read-only without touching the flags a less privileged namespace may not clear).
fn bind_read_only(path: &CStr) -> io::Result<()> {
    let flags = libc::OPEN_TREE_CLONE
        | libc::OPEN_TREE_CLOEXEC
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint;
    // SAFETY: `path` is a NUL-terminated string the plan owns; the call returns a descriptor
    // or -1.
    let tree = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    check(tree)?;
    let tree = tree as libc::c_int;
    let attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `tree` is the descriptor just opened, the empty path and `attr` live on this
    // frame, and the size is the structure's.
    let set = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree,
            c"".as_ptr(),
            (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
            &attr as *const libc::mount_attr,
            size_of::<libc::mount_attr>(),
        )
    };
    let moved = if set < 0 {
        set
    } else {
        // SAFETY: moves the detached tree `tree` onto `path` (both valid as above).
        unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                tree,
                c"".as_ptr(),
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::MOVE_MOUNT_F_EMPTY_PATH,
            )
        }
    };
    let result = check(moved);
    // SAFETY: closes the descriptor this function opened, once.
    unsafe {
        libc::close(tree);
    }
    result
}

/// The kernel's capability structures, version 3.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// No ambient, permitted, effective or inheritable capability left; for root, an empty
/// bounding set too, so `execve` grants none.
fn drop_capabilities(drop_bounding: bool) -> io::Result<()> {
    let zero: libc::c_ulong = 0;
    // SAFETY: prctl with integer arguments only.
    check(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            zero,
            zero,
            zero,
        )
    })?;
    if drop_bounding {
        for cap in 0..64 as libc::c_ulong {
            // SAFETY: prctl with integer arguments only.
            let dropped = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, zero, zero, zero) };
            if dropped < 0 {
                let error = io::Error::last_os_error();
                // EINVAL: past the last capability this kernel knows, so all are dropped.
                if error.raw_os_error() == Some(libc::EINVAL) && cap > 0 {
                    break;
                }
                return Err(error);
            }
        }
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: `header` and the two `data` entries are the kernel's version-3 structures on
    // this frame; capset only reads them.
    check(unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) })
}

/// Write `data` to the file at `path` in one `write`.
fn write_file(path: &CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is a NUL-terminated literal or plan string.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    check(fd)?;
    // SAFETY: writes `data`, which the caller owns, to the descriptor just opened.
    let written = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let result = if written < 0 {
        Err(io::Error::last_os_error())
    } else if written as usize != data.len() {
        Err(io::Error::from(io::ErrorKind::WriteZero))
    } else {
        Ok(())
    };
    // SAFETY: closes the descriptor this function opened, once.
    unsafe {
        libc::close(fd);
    }
    result
}

/// A system call's result: negative is errno's error.
fn check(result: impl Into<i64>) -> io::Result<()> {
    if result.into() < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn at(step: Step) -> impl Fn(io::Error) -> (Step, io::Error) {
    move |error| (step, error)
}
