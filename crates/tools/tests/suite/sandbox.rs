//! The shell tool's sandbox, through the tool as a model calls it: each case runs the same
//! command unconfined (`full`, where it gets through: the test can fail) and confined (where
//! the kernel refuses it and the workspace still works). `troupe chat`'s escape tests
//! (`tests/suite/sandbox_escapes/`) run the same attempts end to end.

use std::path::Path;

use serde_json::json;
use troupe_tools::builtin::{ShellConfig, shell_tool};
use troupe_tools::sandbox::{Reads, Sandbox, SandboxPolicy};
use troupe_tools::{ToolContext, ToolRegistry};

use super::support::run;

/// A workspace `ws` (with a `.git`) and a directory beside it, `outside`.
struct Layout {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn layout() -> Layout {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    Layout {
        _dir: dir,
        ws,
        outside,
    }
}

async fn shell(sandbox: Sandbox, root: &Path, command: &str) -> String {
    let mut registry = ToolRegistry::new();
    registry
        .register(shell_tool(ShellConfig {
            sandbox,
            ..ShellConfig::default()
        }))
        .unwrap();
    let ctx = ToolContext::new("tester", root);
    run(&registry, &ctx, "shell", json!({ "command": command }))
        .await
        .content
}

#[tokio::test]
async fn writes_land_in_the_workspace_and_its_tmpdir_and_nowhere_else() {
    let Layout { ws, outside, .. } = &layout();
    let command = format!(
        "echo in > inside.txt && mkdir d && echo f > d/f && mv d e && cat e/f; \
         echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo \"tmp=$TMPDIR\"; \
         echo x > {out}/absolute.txt; echo x > ../outside/dotdot.txt; \
         echo x >> .git/config",
        out = outside.display()
    );
    let full = shell(Sandbox::full(), ws, &command).await;
    assert!(outside.join("absolute.txt").exists(), "{full}");
    assert!(outside.join("dotdot.txt").exists(), "{full}");
    for f in ["absolute.txt", "dotdot.txt"] {
        std::fs::remove_file(outside.join(f)).unwrap();
    }
    std::fs::remove_file(ws.join("inside.txt")).unwrap();
    std::fs::remove_dir_all(ws.join("e")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();

    let confined = shell(Sandbox::default(), ws, &command).await;
    assert_eq!(
        std::fs::read_to_string(ws.join("inside.txt")).unwrap(),
        "in\n"
    );
    assert_eq!(std::fs::read_to_string(ws.join("e/f")).unwrap(), "f\n");
    assert!(confined.contains("f\nt\ntmp="), "{confined}");
    assert!(!outside.join("absolute.txt").exists(), "{confined}");
    assert!(!outside.join("dotdot.txt").exists(), "{confined}");
    assert!(confined.contains("Permission denied"), "{confined}");
    // .git stays as it was: a read-only bind mount, the command's own EROFS.
    assert!(confined.contains("Read-only file system"), "{confined}");
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    // One line from troupe names the policy.
    assert!(
        confined.contains("[sandbox] this command ran under the workspace-write policy"),
        "{confined}"
    );
    // The private temporary directory went with the call.
    let tmp = confined
        .lines()
        .find_map(|l| l.strip_prefix("tmp="))
        .unwrap();
    assert!(!Path::new(tmp).exists(), "{tmp} outlived the call");
}

#[tokio::test]
async fn a_descriptor_troupe_leaked_does_not_cross_into_a_confined_command() {
    use std::os::fd::AsRawFd as _;
    let Layout { ws, outside, .. } = &layout();
    // Opened without close-on-exec, as a careless library of troupe's might: Landlock does not
    // govern a file opened before it, so the sandbox must not let the command inherit it.
    let leaked = rustix::fs::open(
        outside.join("leaked.txt"),
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CREATE,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    // (bash: sh cannot name a descriptor past 9.)
    let command = format!("bash -c 'echo through >&{}'", leaked.as_raw_fd());
    let full = shell(Sandbox::full(), ws, &command).await;
    assert_eq!(
        std::fs::read_to_string(outside.join("leaked.txt")).unwrap(),
        "through\n",
        "{full}"
    );
    std::fs::write(outside.join("leaked.txt"), "").unwrap();
    let confined = shell(Sandbox::default(), ws, &command).await;
    assert_eq!(
        std::fs::read_to_string(outside.join("leaked.txt")).unwrap(),
        "",
        "{confined}"
    );
    assert!(confined.contains("Bad file descriptor"), "{confined}");
}

#[tokio::test]
async fn read_only_writes_nowhere_and_limited_reads_keep_secrets_out_of_reach() {
    let Layout { ws, outside, .. } = &layout();
    std::fs::write(ws.join("code.rs"), "fn main() {}\n").unwrap();
    std::fs::write(outside.join("id_ed25519"), "PRIVATE KEY\n").unwrap();
    let command = format!(
        "cat code.rs; echo x > new.txt; cat {secret}",
        secret = outside.join("id_ed25519").display()
    );
    let full = shell(Sandbox::full(), ws, &command).await;
    assert!(full.contains("PRIVATE KEY"), "{full}");
    std::fs::remove_file(ws.join("new.txt")).unwrap();

    let read_only = shell(Sandbox::read_only(), ws, &command).await;
    assert!(read_only.contains("fn main() {}"), "{read_only}");
    assert!(!ws.join("new.txt").exists(), "{read_only}");
    // Reads anywhere by default.
    assert!(read_only.contains("PRIVATE KEY"), "{read_only}");

    let limited = Sandbox {
        reads: Reads::Limited(Vec::new()),
        ..Sandbox::with_policy(SandboxPolicy::ReadOnly)
    };
    let limited = shell(limited, ws, &command).await;
    assert!(limited.contains("fn main() {}"), "{limited}");
    assert!(!limited.contains("PRIVATE KEY"), "{limited}");
    assert!(limited.contains("Permission denied"), "{limited}");
}

#[tokio::test]
async fn with_the_network_off_no_socket_reaches_a_listener_on_loopback() {
    let Layout { ws, .. } = &layout();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let command = format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo sent");
    let full = shell(Sandbox::full(), ws, &command).await;
    assert!(full.contains("sent"), "{full}");
    assert!(
        listener.accept().is_ok(),
        "no connection unconfined: {full}"
    );

    let confined = shell(Sandbox::default(), ws, &command).await;
    assert!(!confined.contains("sent"), "{confined}");
    assert!(confined.contains("Operation not permitted"), "{confined}");
    assert!(listener.accept().is_err(), "a connection got through");

    // The network on, by the user's choice, reaches it.
    let on = Sandbox {
        network: true,
        ..Sandbox::default()
    };
    let on = shell(on, ws, &command).await;
    assert!(on.contains("sent"), "{on}");
}

#[tokio::test]
async fn what_a_confined_command_leaves_running_ends_with_the_call() {
    let Layout { ws, .. } = &layout();
    // A grandchild that outlives its parent, and one that starts a session of its own.
    // (Their output goes elsewhere, or unconfined the call would wait for them to close it.)
    let command = "(sh -c 'echo $$ > pid1; exec sleep 300' </dev/null >/dev/null 2>&1 &); \
                   setsid sh -c 'echo $$ > pid2; exec sleep 300 </dev/null >/dev/null 2>&1' 2>setsid.err & \
                   for i in $(seq 600); do [ -s pid1 ] && { [ -s pid2 ] || [ -s setsid.err ]; } && break; \
                   sleep 0.05; done; cat setsid.err >&2; echo started";
    let full = shell(Sandbox::full(), ws, command).await;
    assert!(full.contains("started"), "{full}");
    let pid1 = wait_for_pid(&ws.join("pid1"));
    let pid2 = wait_for_pid(&ws.join("pid2"));
    assert!(
        alive(pid1) && alive(pid2),
        "unconfined, both outlive the call"
    );
    for pid in [pid1, pid2] {
        if let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    std::fs::remove_file(ws.join("pid1")).unwrap();
    std::fs::remove_file(ws.join("pid2")).unwrap();

    let confined = shell(Sandbox::default(), ws, command).await;
    assert!(confined.contains("started"), "{confined}");
    let pid1 = wait_for_pid(&ws.join("pid1"));
    assert!(
        gone(pid1),
        "the double-forked child {pid1} outlived the call"
    );
    // setsid is refused, so the second never started.
    assert!(!ws.join("pid2").exists(), "{confined}");
    assert!(confined.contains("Operation not permitted"), "{confined}");
}

/// The pid a command wrote to `file`, waiting for it (generously: a loaded machine).
fn wait_for_pid(file: &Path) -> u32 {
    for _ in 0..600 {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} never held a pid", file.display());
}

/// Whether `pid` runs (a zombie waiting for its reaper does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.split_whitespace().nth(2).is_none_or(|s| s != "Z"))
}

/// Whether `pid` stops running within a generous deadline.
fn gone(pid: u32) -> bool {
    (0..600).any(|_| {
        let running = alive(pid);
        if running {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        !running
    })
}
