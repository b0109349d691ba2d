//! A hostile model's escape attempts, through a real `troupe chat` whose model is a server on
//! the OpenAI wire format calling the `shell` tool (#53). Each attempt runs twice: under
//! `policy = "full"`, where it gets through (so the test sees it fail with the sandbox off),
//! and under the default `workspace-write` (or the policy named), where the kernel refuses it
//! and the workspace still works.
//!
//! By what they try: writes outside the workspace and claims that turn the sandbox off
//! (`writes.rs`), reads and connections (`reach.rs`), troupe's and the call's processes
//! (`processes.rs`), the kernel check and where the policy shows (`kernel.rs`).

mod kernel;
mod processes;
mod reach;
mod writes;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::support::chat::{chat_command_of, server_running_commands, shell_results};

/// A workspace `ws` (a `.git` in it, the configuration beside the code), a directory
/// `outside` beside it holding `target`, and a home with an SSH key and a keyed config.
struct Scene {
    _dir: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
    home: PathBuf,
    /// The user `troupe chat` runs as, when not the test's own ([`unprivileged`]).
    user: Option<u32>,
}

fn scene() -> Scene {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, outside, home) = (base.join("ws"), base.join("outside"), base.join("home"));
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(ws.join("README.md"), "# the project\n").unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("target"), "original\n").unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE-KEY-MATERIAL\n").unwrap();
    std::fs::create_dir_all(home.join(".config/troupe")).unwrap();
    std::fs::write(
        home.join(".config/troupe/keys.toml"),
        "api_key = \"sk-user-secret-0123456789\"\n",
    )
    .unwrap();
    Scene {
        _dir: dir,
        base,
        ws,
        outside,
        home,
        user: None,
    }
}

/// The user nobody (65534), whom a root test process can run `troupe chat` as.
const NOBODY: u32 = 65534;

/// Whether the test process runs as root (its `/proc/self` is its effective user's).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Whether the test process (and so the troupe it starts) holds capability number `cap` in
/// its effective set: root in a container may lack some (`CAP_SYS_PTRACE` 19, `CAP_SYS_NICE`
/// 23), and then an unconfined command cannot use them either.
fn has_capability(cap: u32) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .is_some_and(|effective| effective & (1 << cap) != 0)
}

/// A scene whose `troupe chat` runs as a user other than root: nobody, its files handed to it
/// and the binary linked beside them (the checkout may lie where nobody cannot reach), when the
/// test runs as root (as CI does); the test's own user otherwise.
fn unprivileged(mut scene: Scene) -> Scene {
    if !is_root() {
        return scene;
    }
    let program = scene.base.join("troupe");
    let binary = env!("CARGO_BIN_EXE_troupe");
    if std::fs::hard_link(binary, &program).is_err() {
        std::fs::copy(binary, &program).unwrap();
    }
    chown_tree(&scene.base, NOBODY);
    scene.user = Some(NOBODY);
    scene
}

/// `dir` and everything beneath it handed to `uid` (and the group of that number).
fn chown_tree(dir: &Path, uid: u32) {
    std::os::unix::fs::lchown(dir, Some(uid), Some(uid)).unwrap();
    if !std::fs::symlink_metadata(dir).unwrap().is_dir() {
        return;
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        chown_tree(&entry.unwrap().path(), uid);
    }
}

/// What one chat left: the shell tool's results in call order, stdout, the exit status.
struct Chat {
    results: Vec<String>,
    stdout: String,
    status: ExitStatus,
}

impl Chat {
    fn result(&self, i: usize) -> &str {
        self.results.get(i).map_or("", String::as_str)
    }
}

/// `troupe chat` in `scene.ws` with the `shell` tool and `[sandbox]` = `sandbox` (TOML lines),
/// its configuration at `ws/troupe.toml` and its session at `session`; the model runs
/// `commands`, one per turn, then says `done`. `input` is what the user types after `go`.
fn chat(
    scene: &Scene,
    sandbox: &str,
    commands: &[String],
    session: &Path,
    env: &[(&str, &str)],
    input: &str,
) -> Chat {
    let (url, requests) = server_running_commands(commands.to_vec());
    let config = scene.ws.join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            "[models.remote]\nprovider = \"openai\"\nbase_url = \"{url}\"\napi_key_env = \
             \"TEST_CHAT_KEY\"\nmodel = \"test-model\"\ncontext_window = 32000\n\n[tools]\n\
             workspace = \"{ws}\"\ntimeout_secs = 60\n\n[agents.assistant]\nmodel = \"remote\"\n\
             tools = [\"shell\"]\n\n[sandbox]\n{sandbox}\n",
            ws = scene.ws.display()
        ),
    )
    .unwrap();
    let program = match scene.user {
        Some(_) => scene.base.join("troupe"),
        None => PathBuf::from(env!("CARGO_BIN_EXE_troupe")),
    };
    let mut command = chat_command_of(&program, &config, session);
    if let Some(user) = scene.user {
        use std::os::unix::process::CommandExt as _;
        command.uid(user).gid(user);
    }
    command
        .current_dir(&scene.ws)
        .env("HOME", &scene.home)
        .env_remove("TROUPE_TRACE")
        .env_remove(troupe::tools::sandbox::LANDLOCK_ABI_AT_MOST_ENV);
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    use std::io::Write as _;
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("go\n{input}/exit\n").as_bytes())
        .unwrap();
    drop(stdin);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    let results = shell_results(&requests.lock().unwrap());
    Chat {
        results,
        stdout,
        status,
    }
}

/// [`chat`] with its session beside the workspace, no environment of the test's and nothing
/// typed after `go`.
fn chat_in(scene: &Scene, sandbox: &str, commands: &[String]) -> Chat {
    chat(
        scene,
        sandbox,
        commands,
        &scene.base.join("s.jsonl"),
        &[],
        "",
    )
}

const FULL: &str = "policy = \"full\"";
const DEFAULT: &str = "";

/// The refusal the sandbox gave, and the line naming the policy beside it.
fn refused(result: &str) -> bool {
    [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
        "Invalid cross-device link",
    ]
    .iter()
    .any(|r| result.contains(r))
        && result.contains("[sandbox] this command ran under the")
}

fn pid_in(file: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never held a pid",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `pid` runs (a zombie waiting for its reaper does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.split_whitespace().nth(2).is_none_or(|s| s != "Z"))
}

/// Whether `pid` stops running within a generous deadline.
fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}
