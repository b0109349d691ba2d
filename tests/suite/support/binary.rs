//! Running the `troupe` binary from tests: one helper set for every CLI test file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `troupe ARGS` with no trace file configured and returns what it did.
pub fn troupe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(args)
        .env_remove("TROUPE_TRACE")
        .output()
        .unwrap()
}

/// The command's stdout, lossily decoded.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The command's stderr, lossily decoded.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs troupe, expects success, returns stdout.
#[track_caller]
pub fn ok(args: &[&str]) -> String {
    let out = troupe(args);
    assert!(
        out.status.success(),
        "troupe {args:?} failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// Runs troupe, expects a failure, returns stderr.
#[track_caller]
pub fn fails(args: &[&str]) -> String {
    let out = troupe(args);
    assert!(
        !out.status.success(),
        "troupe {args:?} should have failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    stderr(&out)
}

/// A path as a `&str` argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `target/debug`, the folder this test binary's `deps/` is in.
pub fn target_debug() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The example's binary, built from its current source.
pub fn example(name: &str) -> PathBuf {
    let binary = target_debug().join("examples").join(name);
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.rs"));
    let built = std::fs::metadata(&binary).and_then(|m| m.modified());
    let edited = std::fs::metadata(&source).unwrap().modified().unwrap();
    assert!(
        built.as_ref().is_ok_and(|built| *built >= edited),
        "{} is missing or older than {}: `cargo test` builds the examples \
         (`cargo build --examples` alone)",
        binary.display(),
        source.display()
    );
    binary
}
