//! Artifact recall: how many of the names an engineer needs after compaction are still there.
//!
//! An *artifact* is something the agent will want to refer to by name later: a command it ran,
//! an error type a tool printed, a test it ran, a file path or a symbol it named itself.
//! [`extract_artifacts`] finds them in a transcript, and [`artifact_recall`] checks which of
//! them the compacted conversation still names.
//!
//! This extractor is deliberately independent of the compaction crate's own artifact code: a
//! measurement that shared the code it measures would report whatever that code decided to
//! keep. It uses plain patterns instead, so it over- and under-counts in its own ways, but not
//! in the same ways as what it measures.
//!
//! Two definitions share the counting: this lenient one (keys cut to what is usually searched
//! for) and the strict one of issue #28 ([`strict_artifact_recall`], in `recall/strict.rs`),
//! which counts every path, error type, `test_…` name, declared symbol and command head as
//! written.
//!
//! "Named" is a substring test on the conversation's text: message contents, tool-call names
//! and the string values of tool-call arguments (decoded from JSON, so quoting does not hide a
//! name), with runs of whitespace collapsed to one space.

mod strict;

pub use strict::{extract_strict_artifacts, strict_artifact_recall};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use troupe_protocol::{ChatMessage, Role};

/// What kind of name an artifact is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactCategory {
    /// A shell command the agent ran (its first line, at most [`COMMAND_KEY_CHARS`] chars).
    Command,
    /// An error type seen in a tool's output (`ValueError`, `error[E0308]`, `error TS2307`).
    Error,
    /// A test that was run (its function name).
    Test,
    /// A file path the agent itself named, in a tool call or its own text.
    Path,
    /// A symbol the agent itself named: a backticked identifier in its text, or a function or
    /// class defined in an edit.
    Symbol,
}

impl ArtifactCategory {
    /// Every category, in report order.
    pub const ALL: [ArtifactCategory; 5] = [
        ArtifactCategory::Command,
        ArtifactCategory::Error,
        ArtifactCategory::Test,
        ArtifactCategory::Path,
        ArtifactCategory::Symbol,
    ];

    /// The category's name in reports.
    pub fn label(self) -> &'static str {
        match self {
            ArtifactCategory::Command => "commands",
            ArtifactCategory::Error => "error types",
            ArtifactCategory::Test => "tests",
            ArtifactCategory::Path => "paths",
            ArtifactCategory::Symbol => "symbols",
        }
    }
}

/// How much of a command identifies it: long commands are usually heredocs or scripts whose
/// tail no one repeats.
pub const COMMAND_KEY_CHARS: usize = 80;

/// Keys shorter than this (`ls`, `cd`) would be "named" by almost any text, so they are not
/// counted.
const MIN_KEY_CHARS: usize = 3;

/// The artifacts of a transcript: per category, the set of keys (the strings looked for).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Artifacts {
    by_category: BTreeMap<ArtifactCategory, BTreeSet<String>>,
}

impl Artifacts {
    /// The keys of one category, sorted.
    pub fn get(&self, category: ArtifactCategory) -> impl Iterator<Item = &str> {
        self.by_category
            .get(&category)
            .into_iter()
            .flat_map(|keys| keys.iter().map(String::as_str))
    }

    /// Whether `key` is an artifact of `category`.
    pub fn contains(&self, category: ArtifactCategory, key: &str) -> bool {
        self.by_category
            .get(&category)
            .is_some_and(|keys| keys.contains(key))
    }

    /// Record `raw` (whitespace collapsed) whatever its length: the strict definition counts
    /// every name it finds.
    fn insert_exact(&mut self, category: ArtifactCategory, raw: &str) {
        let key = collapse_whitespace(raw.trim());
        if !key.is_empty() {
            self.by_category.entry(category).or_default().insert(key);
        }
    }

    fn insert(&mut self, category: ArtifactCategory, raw: &str) {
        let key = collapse_whitespace(raw.trim());
        if key.chars().count() >= MIN_KEY_CHARS {
            self.by_category.entry(category).or_default().insert(key);
        }
    }
}

/// Recall of one category.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CategoryRecall {
    /// Artifacts the protected messages do not name: the ones compaction had to carry.
    pub total: usize,
    /// Of those, the ones the compacted conversation still names.
    pub kept: usize,
    /// Artifacts left out of `total` because a protected message names them.
    pub named_by_protected: usize,
    /// The keys no longer named, sorted.
    pub missing: Vec<String>,
}

impl CategoryRecall {
    /// `kept / total` in percent; `None` when there was nothing to carry.
    pub fn percent(&self) -> Option<f64> {
        (self.total > 0).then(|| 100.0 * self.kept as f64 / self.total as f64)
    }
}

/// Recall per category, and over all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallReport {
    /// One entry per category, in [`ArtifactCategory::ALL`] order.
    pub categories: Vec<(ArtifactCategory, CategoryRecall)>,
}

impl RecallReport {
    /// One category's recall.
    pub fn category(&self, category: ArtifactCategory) -> Option<&CategoryRecall> {
        self.categories
            .iter()
            .find(|(c, _)| *c == category)
            .map(|(_, r)| r)
    }

    /// All categories together (each artifact counts once).
    pub fn overall(&self) -> CategoryRecall {
        let mut all = CategoryRecall::default();
        for (_, r) in &self.categories {
            all.total += r.total;
            all.kept += r.kept;
            all.named_by_protected += r.named_by_protected;
        }
        all
    }
}

/// Of the artifacts of `original` that no message of `protected` names, the share that
/// `compacted` still names, per category.
///
/// `protected` are the messages compaction keeps verbatim (system prompt, task, recent turns):
/// an artifact they name survives whatever compaction does, so it says nothing about it.
pub fn artifact_recall(
    original: &[ChatMessage],
    protected: &[ChatMessage],
    compacted: &[ChatMessage],
) -> RecallReport {
    recall_of(&extract_artifacts(original), protected, compacted)
}

/// Of `artifacts`, those no message of `protected` names, and of those the ones `compacted`
/// names, per category.
fn recall_of(
    artifacts: &Artifacts,
    protected: &[ChatMessage],
    compacted: &[ChatMessage],
) -> RecallReport {
    let protected_text = haystack(protected);
    let compacted_text = haystack(compacted);
    let categories = ArtifactCategory::ALL
        .into_iter()
        .map(|category| {
            let mut recall = CategoryRecall::default();
            for key in artifacts.get(category) {
                if protected_text.contains(key) {
                    recall.named_by_protected += 1;
                    continue;
                }
                recall.total += 1;
                if compacted_text.contains(key) {
                    recall.kept += 1;
                } else {
                    recall.missing.push(key.to_string());
                }
            }
            (category, recall)
        })
        .collect();
    RecallReport { categories }
}

/// Everything `messages` name, as one string: contents, tool-call names, and tool-call
/// arguments (their string values decoded from JSON, or the raw text when it is not JSON),
/// with whitespace runs collapsed.
pub fn haystack(messages: &[ChatMessage]) -> String {
    let mut all = String::new();
    for m in messages {
        all.push_str(&m.text());
        all.push('\n');
        for call in m.calls() {
            all.push_str(&call.function.name);
            all.push('\n');
            for value in argument_strings(&call.function.arguments) {
                all.push_str(&value);
                all.push('\n');
            }
        }
    }
    collapse_whitespace(&all)
}

/// The artifacts of a transcript (see the module documentation for what counts).
///
/// Tool output is read for error types and tests. A transcript without any tool call (an agent
/// that writes its commands as fenced blocks and gets the output back as user messages) is read
/// that way: the first line of each fenced block of an assistant message is a command, and every
/// user message after the first is tool output.
pub fn extract_artifacts(messages: &[ChatMessage]) -> Artifacts {
    let mut artifacts = Artifacts::default();
    let plain_text_agent = messages.iter().all(|m| m.calls().is_empty());
    let first_user = messages.iter().position(|m| m.role == Role::User);
    for (i, message) in messages.iter().enumerate() {
        match message.role {
            Role::Assistant => {
                let text = message.text();
                paths_in_text(&text, &mut artifacts);
                backticked_symbols(&text, &mut artifacts);
                if plain_text_agent {
                    for command in fenced_first_lines(&text) {
                        command_artifacts(&command, &mut artifacts);
                    }
                }
                for call in message.calls() {
                    call_artifacts(
                        &call.function.name,
                        &call.function.arguments,
                        &mut artifacts,
                    );
                }
            }
            Role::Tool => output_artifacts(&message.text(), &mut artifacts),
            Role::User if plain_text_agent && Some(i) != first_user => {
                output_artifacts(&message.text(), &mut artifacts);
            }
            _ => {}
        }
    }
    artifacts
}

/// Whether a tool runs shell commands (its `command` argument is a command line, unlike an
/// editor's `command: "view"`).
fn is_shell_tool(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["bash", "shell", "terminal", "exec", "run", "cmd"]
        .iter()
        .any(|s| name.contains(s))
}

/// Argument keys whose value is a file path.
const PATH_KEYS: [&str; 7] = [
    "path",
    "file_path",
    "filepath",
    "filename",
    "file",
    "dir",
    "directory",
];

fn call_artifacts(name: &str, arguments: &str, artifacts: &mut Artifacts) {
    let Ok(serde_json::Value::Object(args)) = serde_json::from_str::<serde_json::Value>(arguments)
    else {
        paths_in_text(arguments, artifacts);
        return;
    };
    for (key, value) in &args {
        let Some(text) = value.as_str() else { continue };
        if key == "command" && is_shell_tool(name) {
            command_artifacts(text, artifacts);
        } else if PATH_KEYS.contains(&key.as_str()) {
            artifacts.insert(ArtifactCategory::Path, text);
        } else {
            defined_symbols(text, artifacts);
        }
    }
}

/// A command's key, and the paths and tests it names.
fn command_artifacts(command: &str, artifacts: &mut Artifacts) {
    let first_line = command.trim().lines().next().unwrap_or_default().trim();
    let key: String = first_line.chars().take(COMMAND_KEY_CHARS).collect();
    artifacts.insert(ArtifactCategory::Command, &key);
    paths_in_text(command, artifacts);
    tests_in_text(command, artifacts);
}

fn output_artifacts(text: &str, artifacts: &mut Artifacts) {
    static ERROR: LazyLock<Regex> = LazyLock::new(|| {
        compiled(r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b|\berror\[E\d{4}\]|\berror TS\d+")
    });
    for m in ERROR.find_iter(text) {
        artifacts.insert(ArtifactCategory::Error, m.as_str());
    }
    tests_in_text(text, artifacts);
}

/// Tests: pytest node ids (`tests/test_a.py::TestX::test_y[1]` → `test_y`), cargo result lines
/// (`test parser::tests::empty ... ok` → `empty`), and bare `test_x` names.
fn tests_in_text(text: &str, artifacts: &mut Artifacts) {
    static PYTEST: LazyLock<Regex> = LazyLock::new(|| compiled(r"[\w./-]+\.py(?:::\w+)+"));
    static CARGO: LazyLock<Regex> =
        LazyLock::new(|| compiled(r"(?m)^test ([\w:]+) \.\.\. (?:ok|FAILED|ignored)"));
    static BARE: LazyLock<Regex> = LazyLock::new(|| compiled(r"\btest_\w+"));
    for m in PYTEST.find_iter(text) {
        if let Some(name) = m.as_str().rsplit("::").next() {
            artifacts.insert(ArtifactCategory::Test, name);
        }
    }
    for caps in CARGO.captures_iter(text) {
        if let Some(name) = caps.get(1).and_then(|p| p.as_str().rsplit("::").next()) {
            artifacts.insert(ArtifactCategory::Test, name);
        }
    }
    for m in BARE.find_iter(text) {
        // `test_a.py` is a file, not a test.
        if !text[m.end()..].starts_with('.') {
            artifacts.insert(ArtifactCategory::Test, m.as_str());
        }
    }
}

/// File extensions that make a bare name (`setup.py`) a path.
const EXTENSIONS: &str = "rs|py|pyi|ts|tsx|js|jsx|mjs|cjs|json|jsonl|md|toml|ya?ml|txt|sh|c|h|cc|cpp|hpp|go|java|kt|rb|php|cfg|ini|lock|html|css|scss|sql|xml|csv|proto";

/// Paths in free text: a token with a slash whose last segment has an extension or that starts
/// at the root or `./`, or a bare file name with a known extension. URLs are not paths.
fn paths_in_text(text: &str, artifacts: &mut Artifacts) {
    static PATH: LazyLock<Regex> = LazyLock::new(|| {
        compiled(&format!(
            r"(?:~|\.{{1,2}})?/?(?:[\w.@+-]+/)+[\w.@+-]+|\b[\w-]+(?:\.[\w-]+)*\.(?:{EXTENSIONS})\b"
        ))
    });
    for m in PATH.find_iter(text) {
        let token_head = text[..m.start()]
            .rsplit(char::is_whitespace)
            .next()
            .unwrap_or_default();
        if token_head.contains(":/") {
            continue; // a URL (`https://x/y`)
        }
        let path = m.as_str().trim_end_matches(['.', ',']);
        if path.contains("//") || !path.chars().any(|c| c.is_alphanumeric()) {
            continue;
        }
        let last = path.rsplit('/').next().unwrap_or_default();
        let rooted = path.starts_with(['/', '.', '~']);
        if !path.contains('/') || rooted || last.contains('.') {
            artifacts.insert(ArtifactCategory::Path, path);
        }
    }
}

/// Backticked identifiers in the agent's own text: `` `parse_header` ``, `` `Dataset.pixel_array` ``,
/// `` `fmt::Display` ``, `` `run()` ``. Backticked paths are paths, not symbols, and a plain
/// lowercase word counts only when called (`` `render()` ``).
fn backticked_symbols(text: &str, artifacts: &mut Artifacts) {
    static TICKED: LazyLock<Regex> = LazyLock::new(|| {
        compiled(r"`([A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.)[A-Za-z_][A-Za-z0-9_]*)*)(?:\(\))?`")
    });
    static FILE_NAME: LazyLock<Regex> =
        LazyLock::new(|| compiled(&format!(r"\.(?:{EXTENSIONS})$")));
    for caps in TICKED.captures_iter(text) {
        let called = caps.get(0).is_some_and(|m| m.as_str().ends_with("()`"));
        if let Some(symbol) = caps.get(1).map(|s| s.as_str())
            && !FILE_NAME.is_match(symbol)
            && (called || !is_plain_word(symbol))
        {
            artifacts.insert(ArtifactCategory::Symbol, symbol);
        }
    }
}

/// A lowercase word (`red`, `auto`): in backticks it is usually a value or a keyword, not a
/// symbol anyone looks up.
fn is_plain_word(word: &str) -> bool {
    word.chars().all(|c| c.is_ascii_lowercase())
}

/// Functions, classes and types defined in code the agent wrote (edit and write arguments).
fn defined_symbols(code: &str, artifacts: &mut Artifacts) {
    static DEFINITION: LazyLock<Regex> = LazyLock::new(|| {
        compiled(
            r"\b(?:fn|def|class|function|struct|enum|trait|interface|type)\s+([A-Za-z_][A-Za-z0-9_]*)",
        )
    });
    for caps in DEFINITION.captures_iter(code) {
        if let Some(name) = caps.get(1) {
            artifacts.insert(ArtifactCategory::Symbol, name.as_str());
        }
    }
}

/// The first non-empty line of each fenced block (```` ``` ````) of `text`.
fn fenced_first_lines(text: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut inside = false;
    let mut first_pending = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
            first_pending = inside;
            continue;
        }
        if inside && first_pending && !line.trim().is_empty() {
            commands.push(line.trim().to_string());
            first_pending = false;
        }
    }
    commands
}

/// The string values of a tool call's JSON arguments (recursively), or the raw text when it is
/// not JSON.
fn argument_strings(arguments: &str) -> Vec<String> {
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            other => out.push(other.to_string()),
        }
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(value) => {
            let mut out = Vec::new();
            walk(&value, &mut out);
            out
        }
        Err(_) => vec![arguments.to_string()],
    }
}

/// A regex from a pattern written in this file (tests compile every one of them).
fn compiled(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| unreachable!("constant pattern {pattern}: {e}"))
}

fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}
