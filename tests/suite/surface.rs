//! One public path per item (#29, #43): no crate root re-exports an item of one of its own public
//! modules (it would have two paths, `crate::Name` and `crate::module::Name`), no library crate
//! re-exports an item of another workspace crate (it would have two paths,
//! `troupe_protocol::Name` and `troupe_compaction::Name`: only the facade re-exports the crates),
//! and troupe_compaction's root keeps at most 26 names (the rest lives in its topic modules).
//!
//! A text check of the root files, not a compiler one (rustdoc's JSON is nightly-only): it reads
//! `pub mod` and `pub use` lines, which is how every root in this workspace is written.

/// The roots whose `pub use` lists are checked, relative to the workspace.
const ROOTS: [&str; 8] = [
    "crates/protocol/src/lib.rs",
    "crates/host/src/lib.rs",
    "crates/runtime/src/lib.rs",
    "crates/tools/src/lib.rs",
    "crates/models/src/lib.rs",
    "crates/agents/src/lib.rs",
    "crates/compaction/src/lib.rs",
    "crates/session/src/lib.rs",
];

/// The workspace's library crates (the facade aside), whose every source file is read for
/// re-exports of another workspace crate: a `pub use` in any module can make a second path.
const LIBRARY_CRATES: [&str; 14] = [
    "crates/protocol",
    "crates/host",
    "crates/runtime",
    "crates/tools",
    "crates/tokens",
    "crates/compaction",
    "crates/session",
    "crates/models",
    "crates/agents",
    "crates/mcp",
    "crates/cluster",
    "crates/cli",
    "crates/ui",
    "crates/a2a",
];

/// What a user of `compact` sees at troupe_compaction's root, at most (25 until #31 added the
/// `economics` topic module).
const COMPACTION_ROOT_NAMES: usize = 26;

/// The file without `//` comments (doc comments name paths that are not re-exports).
fn source(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names of the file's `pub mod`s.
fn pub_mods(src: &str) -> Vec<String> {
    src.lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches([';', '{', ' ']).to_string())
        .collect()
}

/// The use trees of the file's `pub use` items (`pub(crate) use` is not public).
fn pub_uses(src: &str) -> Vec<String> {
    src.split(';')
        .filter_map(|item| {
            let item = item.trim();
            // An attribute (`#[cfg(…)]`) may precede the item.
            let at = item.find("pub use ")?;
            let before = &item[..at];
            (before.is_empty() || before.trim_end().ends_with(']'))
                .then(|| item[at + "pub use ".len()..].trim().to_string())
        })
        .collect()
}

/// The names a use tree brings in: `a::{B, c::{D, E as F}}` → B, D, F.
fn leaf_names(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let (Some(open), Some(close)) = (tree.find('{'), tree.rfind('}')) else {
        let name = tree.rsplit(" as ").next().unwrap_or(tree);
        return vec![name.rsplit("::").next().unwrap_or(name).trim().to_string()];
    };
    let (mut depth, mut start, mut names) = (0, open + 1, Vec::new());
    for (i, ch) in tree.char_indices().take(close).skip(open + 1) {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.extend(leaf_names(&tree[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    if !tree[start..close].trim().is_empty() {
        names.extend(leaf_names(&tree[start..close]));
    }
    names
}

/// The file of module `name` declared in `parent` (`name.rs` or `name/mod.rs` beside a root or
/// `mod.rs`, under a folder named after any other file).
fn module_file(parent: &str, name: &str) -> Option<String> {
    let (dir, file) = parent.rsplit_once('/')?;
    let dir = match file {
        "lib.rs" | "mod.rs" => dir.to_string(),
        other => format!("{dir}/{}", other.trim_end_matches(".rs")),
    };
    [format!("{dir}/{name}.rs"), format!("{dir}/{name}/mod.rs")]
        .into_iter()
        .find(|candidate| {
            std::path::Path::new(&format!("{}/{candidate}", env!("CARGO_MANIFEST_DIR"))).exists()
        })
}

/// Whether every module on `path` (all its segments but the last) is a `pub mod` of its
/// parent, starting from `root`: then what `path` names is also reachable along it.
fn public_along(root: &str, path: &str) -> bool {
    let segments: Vec<&str> = path.split("::").collect();
    let mut file = root.to_string();
    for module in &segments[..segments.len().saturating_sub(1)] {
        if !pub_mods(&source(&file)).iter().any(|m| m == module) {
            return false;
        }
        match module_file(&file, module) {
            Some(next) => file = next,
            // An inline `pub mod { … }`: public.
            None => return true,
        }
    }
    true
}

#[test]
fn no_root_re_exports_an_item_of_its_own_public_module() {
    let mut doubles = Vec::new();
    for root in ROOTS {
        for tree in pub_uses(&source(root)) {
            let path = tree
                .trim_start_matches("self::")
                .trim_start_matches("crate::");
            // The modules before the names: `m::n::{A, B}` and `m::n::A` both probe `m::n::_`.
            let modules = path.split('{').next().unwrap_or_default();
            let probe = match modules.rsplit_once("::") {
                Some((modules, _)) => format!("{modules}::_"),
                None => continue,
            };
            if public_along(root, &probe) {
                doubles.push(format!(
                    "{root}: `pub use {tree}` (also a public module path)"
                ));
            }
        }
    }
    assert!(
        doubles.is_empty(),
        "items with two public paths:\n{}",
        doubles.join("\n")
    );
}

/// The `.rs` files under `dir` (relative to the workspace), recursively.
fn rust_files(dir: &str) -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_string()];
    while let Some(dir) = dirs.pop() {
        let full = format!("{}/{dir}", env!("CARGO_MANIFEST_DIR"));
        for entry in std::fs::read_dir(&full).unwrap_or_else(|e| panic!("{full}: {e}")) {
            let name = entry.unwrap_or_else(|e| panic!("{full}: {e}")).file_name();
            let path = format!("{dir}/{}", name.to_string_lossy());
            if path.ends_with(".rs") {
                files.push(path);
            } else if std::path::Path::new(&format!("{}/{path}", env!("CARGO_MANIFEST_DIR")))
                .is_dir()
            {
                dirs.push(path);
            }
        }
    }
    files
}

/// The workspace crates' names as Rust spells them (`troupe_protocol`, …).
fn workspace_crate_names() -> Vec<String> {
    LIBRARY_CRATES
        .iter()
        .map(|dir| format!("troupe_{}", dir.trim_start_matches("crates/")))
        .collect()
}

/// The `pub use` trees of `src` that name an item of another workspace crate.
fn cross_crate_re_exports(src: &str) -> Vec<String> {
    let crates = workspace_crate_names();
    pub_uses(src)
        .into_iter()
        .filter(|tree| {
            let first = tree.split("::").next().unwrap_or_default().trim();
            let first = first.split(' ').next().unwrap_or_default();
            crates.iter().any(|c| c == first)
        })
        .collect()
}

#[test]
fn no_library_crate_re_exports_another_workspace_crates_item() {
    // Every member crate is on the list, so a new crate cannot slip past the check.
    let manifest = source("Cargo.toml");
    for dir in LIBRARY_CRATES {
        assert!(
            manifest.contains(&format!("\"{dir}\"")),
            "{dir} is not a member"
        );
    }
    let members = manifest
        .lines()
        .find(|line| line.starts_with("members"))
        .map_or(0, |line| line.matches("\"crates/").count());
    assert_eq!(
        members,
        LIBRARY_CRATES.len(),
        "a member crate is missing here"
    );

    let mut doubles = Vec::new();
    for dir in LIBRARY_CRATES {
        for file in rust_files(&format!("{dir}/src")) {
            for tree in cross_crate_re_exports(&source(&file)) {
                doubles.push(format!("{file}: `pub use {tree}`"));
            }
        }
    }
    assert!(
        doubles.is_empty(),
        "items with a second public path in another crate:\n{}",
        doubles.join("\n")
    );
}

/// The names of the modules `src` declares (`mod name;` or `mod name {`, any visibility).
fn declared_modules(src: &str) -> Vec<String> {
    src.split([';', '{', '\n'])
        .filter_map(|item| {
            let words: Vec<&str> = item.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "mod")?;
            words.get(at + 1).map(|name| name.to_string())
        })
        .collect()
}

/// The `pub use` trees of `src` that name an item of a crate outside the workspace (`std`,
/// `tokio_util`, …): a use that starts at `crate`, `self`, `super`, a module the file declares or
/// a workspace crate is not one.
fn foreign_re_exports(src: &str) -> Vec<String> {
    let crates = workspace_crate_names();
    let modules = declared_modules(src);
    pub_uses(src)
        .into_iter()
        .filter(|tree| {
            let first = tree.split("::").next().unwrap_or_default().trim();
            let first = first.split(' ').next().unwrap_or_default();
            !(["crate", "self", "super"].contains(&first)
                || modules.iter().any(|m| m == first)
                || crates.iter().any(|c| c == first))
        })
        .collect()
}

#[test]
fn no_library_crate_re_exports_a_foreign_crates_item() {
    // A foreign type at a troupe path is a second path to it, and ties troupe's surface to that
    // crate's versions: a user names it from its own crate (`tokio_util::sync::CancellationToken`).
    let mut foreign = Vec::new();
    for dir in LIBRARY_CRATES {
        for file in rust_files(&format!("{dir}/src")) {
            for tree in foreign_re_exports(&source(&file)) {
                foreign.push(format!("{file}: `pub use {tree}`"));
            }
        }
    }
    assert!(
        foreign.is_empty(),
        "items of crates outside the workspace re-exported:\n{}",
        foreign.join("\n")
    );
}

#[test]
fn the_foreign_check_sees_a_re_export() {
    let src = "mod records;\npub use records::Session;\npub use tokio_util::sync::CancellationToken;\n\
               pub use troupe_protocol::A;\npub use crate::B;\npub use std::time::Duration;";
    assert_eq!(
        foreign_re_exports(src),
        ["tokio_util::sync::CancellationToken", "std::time::Duration"]
    );
}

#[test]
fn the_cross_crate_check_sees_a_re_export() {
    // What troupe_compaction had before #43 (the runtime's `CompactionReport`, re-exported at
    // its root) is the first kind; a crate outside the workspace is not checked.
    let src = "pub use troupe_tools::Tool;\npub use troupe_protocol::{A, B as C};\n\
               use troupe_protocol::D;\npub(crate) use troupe_protocol::E;\npub use crate::F;\n\
               pub use tokio_util::sync::CancellationToken;";
    assert_eq!(
        cross_crate_re_exports(src),
        ["troupe_tools::Tool", "troupe_protocol::{A, B as C}"]
    );
}

#[test]
fn troupe_compaction_root_keeps_at_most_26_names() {
    let src = source("crates/compaction/src/lib.rs");
    let mut names = pub_mods(&src);
    names.extend(pub_uses(&src).iter().flat_map(|tree| leaf_names(tree)));
    names.extend(
        src.lines()
            .filter_map(|line| line.strip_prefix("pub "))
            .filter(|rest| !rest.starts_with("use ") && !rest.starts_with("mod "))
            .map(|rest| rest.trim_start_matches("async "))
            .filter_map(|rest| rest.split(['(', '<', ':', ' ', '{']).nth(1))
            .map(str::to_string),
    );
    assert!(
        names.len() <= COMPACTION_ROOT_NAMES,
        "{} names at troupe_compaction's root (modules included): {names:?}",
        names.len()
    );
    // The check sees what it should: the entry point and a topic module.
    assert!(names.iter().any(|n| n == "compact") && names.iter().any(|n| n == "summary"));
}

#[test]
fn the_use_tree_reader_finds_every_name() {
    assert_eq!(
        leaf_names("a::{B, c::{D, E as F}, G}"),
        ["B", "D", "F", "G"].map(String::from)
    );
    assert_eq!(
        pub_uses("#[cfg(x)]\npub use a::B;\npub(crate) use c::D;\nuse e::F;"),
        ["a::B"]
    );
}
