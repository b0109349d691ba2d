//! The pure crates depend on the protocol, not on the runtime (#43): a tool or a compaction does
//! not compile ractor, its cluster feature or the actor runtime, and compaction no TLS either.
//! Read from `cargo tree`, so a new dependency edge anywhere below them is caught too.

use std::process::Command;

/// The packages `package` builds for its code (normal edges only: not its tests' or build
/// scripts'), by name.
fn normal_dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["tree", "--offline", "-p", package, "-e", "normal"])
        .args(["--prefix", "none", "-f", "{p}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The dependencies of `package` among `forbidden` (a name, or a name's prefix ending in `-`
/// or `_`).
fn forbidden_in(package: &str, forbidden: &[&str]) -> Vec<String> {
    let mut found: Vec<String> = normal_dependencies(package)
        .into_iter()
        .filter(|name| {
            forbidden
                .iter()
                .any(|f| name == f || (f.ends_with(['-', '_']) && name.starts_with(f)))
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The actor runtime and what only it brings.
const ACTORS: [&str; 3] = ["troupe-runtime", "ractor", "ractor_"];

#[test]
fn troupe_tools_compiles_no_actor_runtime() {
    assert_eq!(forbidden_in("troupe-tools", &ACTORS), Vec::<String>::new());
}

#[test]
fn troupe_compaction_compiles_no_actor_runtime_and_no_tls() {
    let mut forbidden = ACTORS.to_vec();
    forbidden.extend(["rustls", "aws-lc-", "ring", "troupe-host"]);
    assert_eq!(
        forbidden_in("troupe-compaction", &forbidden),
        Vec::<String>::new()
    );
}

#[test]
fn troupe_tokens_compiles_no_actor_runtime_and_no_tls() {
    let mut forbidden = ACTORS.to_vec();
    forbidden.extend([
        "rustls",
        "aws-lc-",
        "ring",
        "troupe-host",
        "troupe-compaction",
    ]);
    assert_eq!(
        forbidden_in("troupe-tokens", &forbidden),
        Vec::<String>::new()
    );
}

/// The providers count tokens and place Anthropic's breakpoints with troupe-tokens, so they
/// compile no compaction (#54: they did, for those two things alone).
#[test]
fn troupe_models_compiles_no_compaction() {
    assert_eq!(
        forbidden_in("troupe-models", &["troupe-compaction"]),
        Vec::<String>::new()
    );
}

#[test]
fn the_check_sees_the_runtime_where_it_is() {
    // The probe reads what it must: the runtime compiles ractor, so a pure crate depending on it
    // (as troupe-tools did before #43) would list both.
    assert_eq!(
        forbidden_in("troupe-runtime", &ACTORS),
        ["ractor", "troupe-runtime"]
    );
}
