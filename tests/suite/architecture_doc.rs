//! ARCHITECTURE.md stays a true map (#54): every path its code map names exists, every source
//! file is on the map (by its own line or its folder's), every `*.rs` file the document cites
//! exists, and no glossary word is defined twice.
//!
//! A text check of the document, as a newcomer reads it: the code map is the fenced blocks under
//! `## Code map`, each opening with a folder (`crates/protocol/src/`) and indenting two spaces per
//! level, a line `name — what it is` and a folder line `name/ — what it holds`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn architecture() -> String {
    std::fs::read_to_string(workspace().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

/// The text of the section headed `## {title}`, up to the next `## ` heading.
fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    let heading = format!("\n## {title}\n");
    let start = doc
        .find(&heading)
        .unwrap_or_else(|| panic!("no `## {title}` section"))
        + heading.len();
    let end = doc[start..]
        .find("\n## ")
        .map_or(doc.len(), |at| start + at);
    &doc[start..end]
}

/// The paths the code map names, each as written from the workspace root (`crates/x/src/a.rs`,
/// `crates/x/src/dir` for a folder line).
fn code_map_paths(doc: &str) -> Vec<String> {
    let map = section(doc, "Code map");
    let mut paths = Vec::new();
    for block in map.split("```").skip(1).step_by(2) {
        // Each level's folder, from the block's opening one down.
        let mut folders: Vec<String> = Vec::new();
        for line in block.lines().filter(|line| !line.trim().is_empty()) {
            // An entry says `name — what it is`, or is a folder (`name/`); any other line
            // continues the description above it (the map is wrapped to 100 columns).
            // A continuation is indented an odd number of spaces, so an em dash inside it is
            // never taken for an entry's.
            let first = line.split_whitespace().next().unwrap_or_default();
            let indent = line.len() - line.trim_start_matches(' ').len();
            if indent % 2 == 1 || (!line.contains(" — ") && !first.ends_with('/')) {
                continue;
            }
            let entry = line.trim().split(" — ").next().unwrap_or_default().trim();
            let entry = entry.split(' ').next().unwrap_or_default();
            folders.truncate(indent / 2);
            let path = format!("{}{entry}", folders.concat());
            if entry.ends_with('/') {
                folders.push(entry.to_string());
            }
            paths.push(path.trim_end_matches('/').to_string());
        }
    }
    paths
}

/// The Rust files a newcomer reads (library, binary and example sources), relative to the
/// workspace; unit-test modules (`tests.rs`) aside.
fn source_files() -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs = vec!["src".to_string(), "examples".to_string()];
    for entry in std::fs::read_dir(workspace().join("crates")).expect("crates/") {
        let name = entry.expect("an entry of crates/").file_name();
        dirs.push(format!("crates/{}/src", name.to_string_lossy()));
    }
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(workspace().join(&dir)).expect("a source folder") {
            let entry = entry.expect("an entry");
            let path = format!("{dir}/{}", entry.file_name().to_string_lossy());
            if entry.file_type().expect("its type").is_dir() {
                dirs.push(path);
            } else if path.ends_with(".rs") && !path.ends_with("/tests.rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_path_the_code_map_names_exists() {
    let doc = architecture();
    let paths = code_map_paths(&doc);
    assert!(
        paths.len() > 300,
        "the code map was read ({} paths)",
        paths.len()
    );
    let missing: Vec<_> = paths
        .iter()
        .filter(|path| !workspace().join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "the code map names paths that do not exist:\n{missing:#?}"
    );
}

#[test]
fn every_source_file_is_on_the_code_map() {
    let doc = architecture();
    let named: BTreeSet<String> = code_map_paths(&doc).into_iter().collect();
    // A file is on the map by its own line or by a line of a folder it is under.
    let on_map = |file: &str| {
        let mut at = file;
        loop {
            if named.contains(at) {
                return true;
            }
            match at.rsplit_once('/') {
                Some((parent, _)) => at = parent,
                None => return false,
            }
        }
    };
    let unmapped: Vec<_> = source_files()
        .into_iter()
        .filter(|file| !on_map(file))
        .collect();
    assert!(
        unmapped.is_empty(),
        "source files missing from ARCHITECTURE.md's code map (a line each, or their folder's):\n\
         {unmapped:#?}"
    );
}

#[test]
fn every_rust_file_the_document_cites_exists() {
    let doc = architecture();
    let files: Vec<String> = source_files().into_iter().chain(test_files()).collect();
    let mut stale = BTreeSet::new();
    for word in doc.split(|c: char| !(c.is_alphanumeric() || "_./-".contains(c))) {
        let Some(stem) = word.strip_suffix(".rs") else {
            continue;
        };
        if stem.is_empty() || stem.ends_with('/') {
            continue;
        }
        // Cited whole (`crates/x/src/a.rs`) or from a folder a reader is in (`session/log.rs`).
        let cited = word.trim_start_matches("./");
        if !files
            .iter()
            .any(|file| file == cited || file.ends_with(&format!("/{cited}")))
        {
            stale.insert(cited.to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md cites files that do not exist:\n{stale:#?}"
    );
}

/// Test sources (the suites' files that invariants cite by name).
fn test_files() -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs = vec!["tests".to_string(), "benches".to_string()];
    for entry in std::fs::read_dir(workspace().join("crates")).expect("crates/") {
        let name = entry.expect("an entry of crates/").file_name();
        for sub in ["tests", "benches", "src"] {
            dirs.push(format!("crates/{}/{sub}", name.to_string_lossy()));
        }
    }
    dirs.push("examples".to_string());
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(workspace().join(&dir)) else {
            continue;
        };
        for entry in entries {
            let entry = entry.expect("an entry");
            let path = format!("{dir}/{}", entry.file_name().to_string_lossy());
            // The peer benchmark's own workspace keeps its build under its folder.
            if path.ends_with("/target") {
                continue;
            }
            if entry.file_type().expect("its type").is_dir() {
                dirs.push(path);
            } else if path.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The glossary's words, each with the entries that define it: an entry is a list item
/// `- word — what it is` (a table row cannot wrap at 100 columns), its word split at ` / `
/// (`compaction / compact` defines both), backticks and case aside.
fn glossary_words(doc: &str) -> BTreeMap<String, Vec<String>> {
    let mut words: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in section(doc, "Glossary").lines() {
        let Some((first, _)) = row
            .strip_prefix("- ")
            .and_then(|item| item.split_once(" — "))
        else {
            continue;
        };
        let first = first.trim();
        for word in first.split(" / ") {
            let word = word.trim().trim_matches('`').to_lowercase();
            words.entry(word).or_default().push(first.to_string());
        }
    }
    words
}

#[test]
fn no_glossary_word_is_defined_twice() {
    let doc = architecture();
    let words = glossary_words(&doc);
    assert!(
        words.len() > 40,
        "the glossary was read ({} words)",
        words.len()
    );
    let twice: Vec<_> = words.iter().filter(|(_, rows)| rows.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "glossary words defined in more than one row:\n{twice:#?}"
    );
}

#[test]
fn the_checks_see_a_missing_path_and_a_word_defined_twice() {
    let doc = "# A\n\n## Code map\n\n```\ncrates/protocol/src/\n  lib.rs — root\n  gone.rs — \
               no more,\n    wrapped\n  trace/\n    file_line.rs — lines, wrapped\n     at an odd \
               indent — even with a dash\n```\n\n## Glossary\n\n- step — one commit\n- `Step` / in \
               flight — again,\n  wrapped — and dashed\n\n## End\n";
    let paths = code_map_paths(doc);
    assert_eq!(
        paths,
        [
            "crates/protocol/src",
            "crates/protocol/src/lib.rs",
            "crates/protocol/src/gone.rs",
            "crates/protocol/src/trace",
            "crates/protocol/src/trace/file_line.rs",
        ]
    );
    assert!(!workspace().join(&paths[2]).exists());
    let words = glossary_words(doc);
    assert_eq!(words["step"].len(), 2);
    assert_eq!(words["in flight"].len(), 1);
}

/// Every line of the document fits 100 columns (#54: 390 did not, one 1,367), counted in
/// characters as an editor shows them.
#[test]
fn every_line_fits_100_columns() {
    let doc = architecture();
    let long: Vec<(usize, usize)> = doc
        .lines()
        .enumerate()
        .map(|(at, line)| (at + 1, line.chars().count()))
        .filter(|&(_, width)| width > 100)
        .collect();
    assert!(
        long.is_empty(),
        "ARCHITECTURE.md lines over 100 columns (line, width): {long:?}"
    );
}
