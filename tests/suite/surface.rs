//! One public path per item (#29): no crate root re-exports an item of one of its own public
//! modules (it would have two paths, `crate::Name` and `crate::module::Name`), and
//! troupe_compaction's root keeps at most 26 names (the rest lives in its topic modules).
//!
//! A text check of the root files, not a compiler one (rustdoc's JSON is nightly-only): it reads
//! `pub mod` and `pub use` lines, which is how every root in this workspace is written.

/// The roots whose `pub use` lists are checked, relative to the workspace.
const ROOTS: [&str; 5] = [
    "crates/runtime/src/lib.rs",
    "crates/tools/src/lib.rs",
    "crates/agents/src/lib.rs",
    "crates/agents/src/model/mod.rs",
    "crates/compaction/src/lib.rs",
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
