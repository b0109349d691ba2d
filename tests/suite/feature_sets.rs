//! One feature set for the binary and the examples: every crate both builds compile resolves
//! the same features in each, so `cargo build --bin troupe` and `cargo run --example …` reuse
//! each other's crates instead of rebuilding every crate above the one whose features differ
//! (the dev-dependencies, which examples and tests get and the binary does not, used to add
//! tokio's `test-util`, hyper's server and tracing's `log`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// `cargo tree` of the root package: `name version` → its feature sets (two when a crate is
/// built for build scripts with other features than for the code).
fn features(edges: &str) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["tree", "--offline", "-p", "troupe", "--prefix", "none"])
        .args(["-e", edges, "-f", "{p}|{f}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut features: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        if let Some((package, set)) = line.split_once('|') {
            let set = set.trim_end_matches(" (*)").trim().to_string();
            features
                .entry(package.trim().to_string())
                .or_default()
                .insert(set);
        }
    }
    features
}

#[test]
fn the_binary_and_the_examples_resolve_the_same_features() {
    let binary = features("no-dev");
    let examples = features("normal,build,dev");
    let differ: Vec<String> = binary
        .iter()
        .filter_map(|(package, features)| {
            let theirs = examples.get(package)?;
            // A crate built for build scripts and for the code is two units: the examples may
            // add one, but each unit the binary builds must be among theirs, features and all.
            (!features.is_subset(theirs)).then(|| format!("{package}: {features:?} vs {theirs:?}"))
        })
        .collect();
    assert!(binary.len() > 100, "{binary:?}");
    assert!(
        differ.is_empty(),
        "features the binary's build (left) and the examples' (right) resolve differently, \
         each a rebuild of every crate above it when switching:\n{}",
        differ.join("\n")
    );
}
