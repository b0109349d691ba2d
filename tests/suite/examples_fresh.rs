//! Every example runs for a newcomer (#43): each example's `--scripted` form, run from the
//! binary `cargo test` builds (`target/debug/examples/NAME`) with nothing of CI's around it —
//! the environment cleared but for `PATH`, `HOME` a fresh folder (no `~/.cache/troupe-ci`, no
//! downloaded model, no config), no `TROUPE_*` variable, and a fresh working directory — exits
//! 0 and prints the lines that show its point.
//!
//! `mcp_tools` starts its MCP server as a newcomer's machine can: through `npx` (tested with the
//! `PATH` as it is), through a virtualenv it makes under `target/` (a `PATH` with only
//! `python3`), or says what to install (an empty `PATH`). The npx road may download the server
//! from the npm registry, so its run keeps one thing from the user's environment: npm's own
//! cache (`npm_config_cache`), which holds downloads, never an installed server, so that the
//! registry is asked once per machine rather than on every test run. The venv road downloads
//! from PyPI the first time `target/` lacks its virtualenv. CI (`.ci/run`) reaches both
//! registries; the versions are the ones `.ci/run` pins.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::support::binary::{example, target_debug};
use std::time::{Duration, Instant};

/// Every example under `examples/` but `eval` (a directory: the lead's compaction eval, which
/// needs the corpus and has no scripted form), with lines its `--scripted` run must print.
const EXAMPLES: [(&str, &[&str]); 11] = [
    (
        "a2a",
        &[
            "weather (over A2A): Lisbon tomorrow: sunny, 24 °C, a light wind from the sea.",
            "coordinator: Sunny and 24 °C: pack light clothes",
            "trip-planner: Sunny and 24 °C: pack light clothes",
        ],
    ),
    (
        "controls",
        &[
            r#"shell {"command":"rm build.log"} (ops:call_1#1): approved"#,
            "BudgetExceeded: spent ",
            ": pinned and byte-identical (",
            "rate limit: ops, auditor and coder called one endpoint under one limit",
        ],
    ),
    (
        "custom_tool",
        &[
            "tool call: convert_temperature (ok)",
            "answer: 21.5 °C is 70.7 °F.",
        ],
    ),
    (
        "distributed",
        &[
            "connected: node `coordinator` ↔ node `workers`",
            "answer: Announcing Crumb & Co. — \"Fresh from our oven to your morning.\"",
            // The merged trace holds the workers' side, written by the other process.
            "agent namer  (asked by coordinator)",
        ],
    ),
    (
        "long_session",
        &["compaction started (automatic)", "compaction finished: "],
    ),
    (
        "mcp_tools",
        &[
            "tool call: everything__get-sum (ok)",
            "tool result: The sum of 1234 and 4321 is 5555.",
        ],
    ),
    (
        "replay_team",
        &[
            "replay: identical — 3 answers, 2 tool calls, ",
            "changed program: agent `tester`, model call 2: the request differs from the recorded one: messages[3] (tool) content differs",
        ],
    ),
    (
        "scoped_compress",
        &[
            "close_scope(no model) -> error: compress requires a model but none declared",
            "close_scope(empty scope) -> None (skipped)",
            r#"user Summary  <scope label="recipes">"#,
        ],
    ),
    (
        "structured_output",
        &[
            "model calls: 2",
            "answer: Paris (France): about 2100000 people, size Metropolis",
        ],
    ),
    (
        "team",
        &[
            "namer> Crumb & Co.",
            "coordinator> Announcing Crumb & Co. — \"Fresh from our oven to your morning.\"",
        ],
    ),
    (
        "traces",
        &[
            "team answer: Our sourdough rises for 12 hours: slow bread, fast smiles.",
            "tool lookup [call_2]",
            "ERROR (refused)",
        ],
    ),
];

/// Past this an example is killed and the test fails: a hang is a failure, not a wait. The npx
/// and pip downloads on a fresh machine are the slow part.
const LIMIT: Duration = Duration::from_secs(300);

#[test]
fn every_scripted_example_runs_from_a_clean_environment() {
    let on_disk = examples_on_disk();
    let listed: Vec<&str> = EXAMPLES.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        on_disk, listed,
        "every example under examples/ has a row here"
    );

    let npx = on_path("npx") && on_path("node");
    if !npx {
        assert!(!under_ci(), "under CI .ci/run installs node and npm");
        eprintln!("mcp_tools skipped here: no npx on PATH (its venv road has its own test)");
    }
    let everything = pinned_version("MCP_EVERYTHING_VERSION");
    let runs: Vec<_> = EXAMPLES
        .iter()
        .filter(|(name, _)| npx || *name != "mcp_tools")
        .map(|(name, lines)| {
            let fresh = Fresh::new();
            let mut command = fresh.command(name, &path_var());
            if let (true, Some(cache)) = (*name == "mcp_tools", npm_cache()) {
                command.env("npm_config_cache", cache);
            }
            (name, lines, fresh, spawn(command))
        })
        .collect();
    for (name, lines, _fresh, child) in runs {
        let out = finish(name, child);
        assert!(out.status.success(), "{name} failed:\n{}", shown(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        // A scripted run has nothing to warn about (a scripted summary the summarizer does not
        // trust, say).
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("WARN"), "{name} warned:\n{}", shown(&out));
        for line in lines.iter() {
            assert!(
                stdout.contains(line),
                "{name} did not print `{line}`:\n{}",
                shown(&out)
            );
        }
        if *name == "mcp_tools" {
            let server = format!(
                "server: npx -y @modelcontextprotocol/server-everything@{everything} stdio"
            );
            assert!(stdout.contains(&server), "{server}?\n{}", shown(&out));
        }
    }
}

#[cfg(unix)]
#[test]
fn mcp_tools_without_node_installs_the_pypi_server_into_a_venv_under_target() {
    let Some(python) = python_with_venv() else {
        assert!(!under_ci(), "under CI .ci/run installs python3 and venv");
        eprintln!("skipped: no python3 with venv here");
        return;
    };
    let fresh = Fresh::new();
    // A PATH with python3 and nothing else: no npx, no node.
    let bin = fresh.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(&python, bin.join("python3")).unwrap();
    let out = finish(
        "mcp_tools",
        spawn(fresh.command("mcp_tools", bin.as_os_str())),
    );
    assert!(out.status.success(), "{}", shown(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let time = pinned_version("MCP_TIME_VERSION");
    let venv = target_debug().join(format!("mcp-servers/mcp-server-time-{time}"));
    let server = format!("server: {}", venv.join("bin/mcp-server-time").display());
    assert!(stdout.contains(&server), "{server}?\n{}", shown(&out));
    assert!(
        stdout.contains("tool call: time__get_current_time (ok)"),
        "{}",
        shown(&out)
    );
    assert!(
        stdout.contains(r#"tool result: { "timezone": "Asia/Tokyo""#),
        "{}",
        shown(&out)
    );
}

#[test]
fn mcp_tools_with_neither_node_nor_python_says_in_one_line_what_to_install() {
    let fresh = Fresh::new();
    let empty = fresh.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = finish(
        "mcp_tools",
        spawn(fresh.command("mcp_tools", empty.as_os_str())),
    );
    assert!(!out.status.success(), "{}", shown(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{}", shown(&out));
    assert!(
        stderr.contains("install Node.js") && stderr.contains("Python 3 with venv"),
        "{}",
        shown(&out)
    );
}

/// A fresh home and working directory for one run.
struct Fresh {
    dir: tempfile::TempDir,
}

impl Fresh {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        Fresh { dir }
    }

    /// `NAME --scripted` with only `PATH` and a fresh `HOME` in its environment.
    fn command(&self, name: &str, path: &std::ffi::OsStr) -> Command {
        let mut command = Command::new(example(name));
        command
            .arg("--scripted")
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.dir.path().join("home"))
            .current_dir(self.dir.path().join("work"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }
}

/// The examples' names: `examples/*.rs`.
fn examples_on_disk() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The version `.ci/run` pins as `KEY=VERSION`.
fn pinned_version(key: &str) -> String {
    let run =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run")).unwrap();
    run.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in .ci/run"))
        .trim()
        .to_string()
}

fn path_var() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_default()
}

fn on_path(program: &str) -> bool {
    std::env::split_paths(&path_var()).any(|dir| dir.join(program).is_file())
}

fn under_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// npm's download cache: `npm_config_cache`, else npm's default `~/.npm`.
fn npm_cache() -> Option<PathBuf> {
    std::env::var_os("npm_config_cache")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".npm")))
}

/// The real python3 behind `PATH`'s (a pyenv shim is a script needing more than `PATH`), when
/// it can make a virtualenv.
fn python_with_venv() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, sys, venv, ensurepip; print(os.path.realpath(sys.executable))",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// A started example, its output read as it comes (a full pipe would stall it).
struct Running {
    child: std::process::Child,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

fn spawn(mut command: Command) -> Running {
    let mut child = command.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    Running {
        child,
        stdout: std::thread::spawn(move || read_all(&mut stdout)),
        stderr: std::thread::spawn(move || read_all(&mut stderr)),
    }
}

/// The example's output once it exits; killed and failed past [`LIMIT`].
fn finish(name: &str, mut running: Running) -> Output {
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = running.child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            running.child.kill().unwrap();
            running.child.wait().unwrap();
            panic!("{name} still running after {LIMIT:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: running.stdout.join().unwrap(),
        stderr: running.stderr.join().unwrap(),
    }
}

fn read_all(from: &mut impl std::io::Read) -> Vec<u8> {
    let mut all = Vec::new();
    from.read_to_end(&mut all).unwrap();
    all
}

fn shown(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
