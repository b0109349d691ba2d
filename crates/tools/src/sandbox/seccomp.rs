//! The seccomp program every confined command runs under, built in the parent as classic BPF.
//!
//! It refuses (EPERM), whatever the policy: `setsid` and `setpgid`, so nothing a command starts
//! leaves the process group the call kills at its end; `io_uring`, whose operations open files
//! and sockets past this filter. With the network off it also refuses `socket` of every family
//! (TCP, UDP, unix by path or abstract, netlink…) and `connect`, `bind`, `listen`, `accept`,
//! leaving only `socketpair` of stream or seqpacket unix sockets, which connect two ends made
//! together and can reach nothing else. A call made through another architecture's entry
//! (x86's `int 0x80`) kills the process; an x32 call is refused.

/// What the filter answers.
const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_DENY: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// The audit architecture the filter accepts.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

/// x32 system calls are the x86_64 numbers with this bit set.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `struct seccomp_data`'s fields: the call's number, the architecture, the low half of
/// argument `n` (little-endian).
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg_low(n: u32) -> u32 {
    16 + 8 * n
}

/// Classic BPF opcodes.
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

/// Where a jump lands, resolved when the program is laid out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum To {
    Next,
    Allow,
    Deny,
    Kill,
    SocketPair,
}

/// One instruction before layout.
struct Insn {
    code: u16,
    yes: To,
    no: To,
    k: u32,
}

fn load(offset: u32) -> Insn {
    Insn {
        code: LD_W_ABS,
        yes: To::Next,
        no: To::Next,
        k: offset,
    }
}

fn jump(code: u16, k: u32, yes: To, no: To) -> Insn {
    Insn { code, yes, no, k }
}

/// Calls refused whatever the network setting.
fn always_denied() -> [libc::c_long; 5] {
    [
        libc::SYS_setsid,
        libc::SYS_setpgid,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ]
}

/// Calls refused with the network off (`socketpair` is checked on its arguments).
fn network_denied() -> [libc::c_long; 6] {
    [
        libc::SYS_socket,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_accept,
        libc::SYS_accept4,
    ]
}

/// The program for a sandbox with the network `network`.
pub(super) fn program(network: bool) -> Vec<libc::sock_filter> {
    let nr = |n: libc::c_long| u32::try_from(n).unwrap_or(u32::MAX);
    let mut body = vec![
        load(ARCH),
        jump(JEQ_K, AUDIT_ARCH, To::Next, To::Kill),
        load(NR),
    ];
    if cfg!(target_arch = "x86_64") {
        body.push(jump(JGE_K, X32_SYSCALL_BIT, To::Deny, To::Next));
    }
    for call in always_denied() {
        body.push(jump(JEQ_K, nr(call), To::Deny, To::Next));
    }
    if !network {
        for call in network_denied() {
            body.push(jump(JEQ_K, nr(call), To::Deny, To::Next));
        }
        body.push(jump(
            JEQ_K,
            nr(libc::SYS_socketpair),
            To::SocketPair,
            To::Next,
        ));
    }
    body.push(ret(RET_ALLOW));
    let pair_block = vec![
        load(arg_low(0)),
        jump(JEQ_K, libc::AF_UNIX as u32, To::Next, To::Deny),
        load(arg_low(1)),
        Insn {
            code: AND_K,
            yes: To::Next,
            no: To::Next,
            // SOCK_TYPE_MASK: the type without SOCK_CLOEXEC and SOCK_NONBLOCK.
            k: 0xf,
        },
        jump(JEQ_K, libc::SOCK_STREAM as u32, To::Allow, To::Next),
        jump(JEQ_K, libc::SOCK_SEQPACKET as u32, To::Allow, To::Deny),
    ];
    layout(body, if network { Vec::new() } else { pair_block })
}

fn ret(k: u32) -> Insn {
    Insn {
        code: RET_K,
        yes: To::Next,
        no: To::Next,
        k,
    }
}

/// The body, the socketpair block, then the three answers; jumps resolved to offsets.
fn layout(body: Vec<Insn>, pair_block: Vec<Insn>) -> Vec<libc::sock_filter> {
    let pair_at = body.len();
    let allow_at = pair_at + pair_block.len();
    let (deny_at, kill_at) = (allow_at + 1, allow_at + 2);
    let insns: Vec<Insn> = body
        .into_iter()
        .chain(pair_block)
        .chain([ret(RET_ALLOW), ret(RET_DENY), ret(RET_KILL)])
        .collect();
    insns
        .iter()
        .enumerate()
        .map(|(at, insn)| {
            let offset = |to: To| {
                let target = match to {
                    To::Next => at + 1,
                    To::Allow => allow_at,
                    To::Deny => deny_at,
                    To::Kill => kill_at,
                    To::SocketPair => pair_at,
                };
                // Every jump is forward and the program has a few dozen instructions.
                u8::try_from(target - at - 1).unwrap_or(u8::MAX)
            };
            libc::sock_filter {
                code: insn.code,
                jt: offset(insn.yes),
                jf: offset(insn.no),
                k: insn.k,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the kernel would answer: the program run on one call, as the kernel runs classic
    /// BPF (the instructions the program uses).
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32, args: [u32; 6]) -> u32 {
        let field = |offset: u32| match offset {
            NR => nr,
            ARCH => arch,
            o => args[((o - 16) / 8) as usize],
        };
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let insn = program[pc];
            match insn.code {
                LD_W_ABS => acc = field(insn.k),
                AND_K => acc &= insn.k,
                RET_K => return insn.k,
                JEQ_K | JGE_K => {
                    let taken = if insn.code == JEQ_K {
                        acc == insn.k
                    } else {
                        acc >= insn.k
                    };
                    pc += usize::from(if taken { insn.jt } else { insn.jf });
                }
                other => panic!("unexpected opcode {other:#x}"),
            }
            pc += 1;
        }
    }

    fn call(program: &[libc::sock_filter], nr: libc::c_long, args: [u32; 6]) -> u32 {
        run(program, AUDIT_ARCH, nr as u32, args)
    }

    #[test]
    fn with_the_network_off_no_socket_can_be_made_but_connected_pairs() {
        let p = program(false);
        for nr in network_denied().into_iter().chain(always_denied()) {
            assert_eq!(
                call(&p, nr, [libc::AF_UNIX as u32, 1, 0, 0, 0, 0]),
                RET_DENY
            );
        }
        let pair = |domain: i32, kind: i32| {
            call(
                &p,
                libc::SYS_socketpair,
                [domain as u32, kind as u32, 0, 0, 0, 0],
            )
        };
        assert_eq!(pair(libc::AF_UNIX, libc::SOCK_STREAM), RET_ALLOW);
        assert_eq!(
            pair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC),
            RET_ALLOW
        );
        assert_eq!(pair(libc::AF_UNIX, libc::SOCK_SEQPACKET), RET_ALLOW);
        // A datagram pair can be pointed at any socket by path: refused.
        assert_eq!(pair(libc::AF_UNIX, libc::SOCK_DGRAM), RET_DENY);
        assert_eq!(pair(libc::AF_INET, libc::SOCK_STREAM), RET_DENY);
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_execve,
            libc::SYS_clone,
            libc::SYS_sendto,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), RET_ALLOW, "{nr}");
        }
    }

    #[test]
    fn with_the_network_on_sockets_are_allowed_and_process_groups_still_kept() {
        let p = program(true);
        assert_eq!(
            call(&p, libc::SYS_socket, [libc::AF_INET as u32, 1, 0, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(call(&p, libc::SYS_connect, [0; 6]), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_setsid, [0; 6]), RET_DENY);
        assert_eq!(call(&p, libc::SYS_setpgid, [0; 6]), RET_DENY);
        assert_eq!(call(&p, libc::SYS_io_uring_setup, [0; 6]), RET_DENY);
    }

    #[test]
    fn another_architectures_entry_kills_and_x32_is_refused() {
        for p in [program(false), program(true)] {
            assert_eq!(
                run(&p, 0x4000_0003, libc::SYS_socket as u32, [0; 6]),
                RET_KILL
            );
            if cfg!(target_arch = "x86_64") {
                assert_eq!(run(&p, AUDIT_ARCH, X32_SYSCALL_BIT | 41, [0; 6]), RET_DENY);
            }
        }
    }

    proptest::proptest! {
        /// Every call the filter does not name is allowed, whatever its arguments.
        #[test]
        fn calls_it_does_not_name_are_allowed(nr in 0u32..1024, args in proptest::array::uniform6(proptest::prelude::any::<u32>())) {
            let named: Vec<u32> = network_denied()
                .into_iter()
                .chain(always_denied())
                .chain([libc::SYS_socketpair])
                .map(|n| n as u32)
                .collect();
            proptest::prop_assume!(!named.contains(&nr));
            proptest::prop_assert_eq!(run(&program(false), AUDIT_ARCH, nr, args), RET_ALLOW);
        }
    }
}
