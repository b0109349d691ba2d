//! The strict recall definition of issue #28, as written there:
//!
//! - **paths** the agent named: in its own prose (backticked or not, including file trees it
//!   wrote in code fences), in every argument of the shell commands it ran, and in path-like
//!   arguments of other tools (`path`, `file`, `file_path`, `filename`, `target`, `source`,
//!   `dest`, `dir`, …) — not the bodies of files it wrote or edited;
//! - **errors**: `SomethingError` / `SomethingException` seen anywhere;
//! - **tests**: `test_…` seen anywhere;
//! - **symbols** declared in the agent's messages or tool calls (`def`, `class`, `fn`,
//!   `function`, `struct`, `enum`, `trait` NAME);
//! - **commands**: the first two words of every shell command.
//!
//! At risk: not already named by the protected messages. Kept: the string appears anywhere in
//! the compacted transcript. Recall = kept ÷ at risk.
//!
//! What "path-like" means is this file's choice (the issue does not spell it out), made wide on
//! purpose: in a shell command or a path argument, any token with a `/` (not a URL) or a file
//! name with a known extension; in prose, a token rooted at `/`, `./`, `../` or `~/` with two
//! segments or more, or whose last segment has an extension, or of three segments or more, or a
//! file name with a known extension. A leading `./` and a trailing `/` are not part of the
//! name (`./src/a.py` names `src/a.py`). Heredoc bodies in a shell command and the text an edit
//! or write puts into a file are bodies, not arguments.
//!
//! Like the lenient extractor beside it, this shares no code with the compaction crate's
//! artifact ledger: it measures that ledger, so it must not reuse its decisions.

use std::sync::LazyLock;

use regex::Regex;
use troupe_protocol::{ChatMessage, Role};

use super::{
    ArtifactCategory, Artifacts, RecallReport, argument_strings, compiled, fenced_first_lines,
    recall_of,
};

/// Of the artifacts of `original` (by the strict definition) that no message of `protected`
/// names, the share that `compacted` still names, per category.
pub fn strict_artifact_recall(
    original: &[ChatMessage],
    protected: &[ChatMessage],
    compacted: &[ChatMessage],
) -> RecallReport {
    recall_of(&extract_strict_artifacts(original), protected, compacted)
}

/// The artifacts of a transcript by the strict definition (see the module documentation).
///
/// A transcript without any tool call (an agent that writes its commands as fenced blocks and
/// gets the output back as user messages) is read that way: the first line of each fenced block
/// of an assistant message is a shell command, the rest of the block is what it writes (an edit
/// body), and the text outside the blocks is the agent's prose.
pub fn extract_strict_artifacts(messages: &[ChatMessage]) -> Artifacts {
    let mut found = Artifacts::default();
    let plain_text_agent = messages.iter().all(|m| m.calls().is_empty());
    for message in messages {
        let text = message.text();
        errors_and_tests(&text, &mut found);
        for call in message.calls() {
            for value in argument_strings(&call.function.arguments) {
                errors_and_tests(&value, &mut found);
            }
        }
        if message.role != Role::Assistant {
            continue;
        }
        declared_symbols(&text, &mut found);
        if plain_text_agent {
            for command in fenced_first_lines(&text) {
                shell_command(&command, &mut found);
            }
            prose_paths(&outside_fences(&text), &mut found);
        } else {
            prose_paths(&text, &mut found);
        }
        for call in message.calls() {
            call_artifacts(&call.function.name, &call.function.arguments, &mut found);
        }
    }
    found
}

/// Whether a tool runs shell commands.
fn is_shell_tool(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["bash", "shell", "terminal", "exec", "run", "cmd", "sh"]
        .iter()
        .any(|s| name == *s || (s.len() > 2 && name.contains(s)))
}

/// Argument keys whose value is a shell command line (for a shell tool).
const COMMAND_KEYS: [&str; 3] = ["command", "cmd", "script"];

/// Whether an argument key names a path: the issue's list, their spellings, and any key ending
/// in `path`, `file`, `dir` or `directory`.
fn is_path_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    const KEYS: [&str; 12] = [
        "path",
        "paths",
        "file",
        "files",
        "target",
        "source",
        "src",
        "dest",
        "destination",
        "cwd",
        "folder",
        "root",
    ];
    KEYS.contains(&key.as_str())
        || ["path", "file", "filename", "file_name", "dir", "directory"]
            .iter()
            .any(|end| key.ends_with(end))
}

fn call_artifacts(tool: &str, arguments: &str, found: &mut Artifacts) {
    let Ok(serde_json::Value::Object(args)) = serde_json::from_str::<serde_json::Value>(arguments)
    else {
        return;
    };
    for (key, value) in &args {
        // Symbols are read from every argument, bodies included: they are declared there.
        for text in strings(value) {
            declared_symbols(text, found);
        }
        if COMMAND_KEYS.contains(&key.as_str()) && is_shell_tool(tool) {
            let command = match value {
                serde_json::Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                other => strings(other).join("\n"),
            };
            shell_command(&command, found);
        } else if is_path_key(key) {
            for text in strings(value) {
                if let Some(path) = path_key(text, Context::Argument) {
                    found.insert_exact(ArtifactCategory::Path, &path);
                }
            }
        }
    }
}

/// The string values of a JSON value: itself, or the strings of an array.
fn strings(value: &serde_json::Value) -> Vec<&str> {
    match value {
        serde_json::Value::String(s) => vec![s.as_str()],
        serde_json::Value::Array(items) => items.iter().filter_map(|v| v.as_str()).collect(),
        _ => Vec::new(),
    }
}

/// A shell command: its first two words, and every path among its arguments (heredoc bodies
/// left out: they are what the command writes).
fn shell_command(command: &str, found: &mut Artifacts) {
    let words: Vec<&str> = command.split_whitespace().take(2).collect();
    if !words.is_empty() {
        found.insert_exact(ArtifactCategory::Command, &words.join(" "));
    }
    for token in shell_tokens(&without_heredoc_bodies(command)) {
        if let Some(path) = path_key(token, Context::Shell) {
            found.insert_exact(ArtifactCategory::Path, &path);
        }
    }
}

/// `command` without the lines of its heredocs (`<< 'EOF'` … `EOF`).
fn without_heredoc_bodies(command: &str) -> String {
    let mut out = String::new();
    let mut until: Option<String> = None;
    for line in command.lines() {
        if let Some(end) = &until {
            if line.trim() == end {
                until = None;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if let Some(at) = line.find("<<") {
            let rest = line[at + 2..].trim_start_matches(['-', '~']).trim_start();
            let delimiter: String = rest
                .trim_start_matches(['\'', '"'])
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !delimiter.is_empty() {
                until = Some(delimiter);
            }
        }
    }
    out
}

/// The words of a shell command: split at whitespace, quotes and operators, and an option's
/// value after its `=`.
fn shell_tokens(command: &str) -> impl Iterator<Item = &str> {
    command
        .split(|c: char| c.is_whitespace() || "'\"`;|&<>(){}$".contains(c))
        .flat_map(|word| word.split('='))
        .filter(|w| !w.is_empty())
}

/// The paths in the agent's prose: words split at whitespace, quotes, brackets and commas,
/// with a location's `:12` and sentence punctuation cut off.
fn prose_paths(text: &str, found: &mut Artifacts) {
    for word in text.split(|c: char| c.is_whitespace() || "`'\"()[]{}<>,;*|│├└─".contains(c))
    {
        if let Some(path) = path_key(word, Context::Prose) {
            found.insert_exact(ArtifactCategory::Path, &path);
        }
    }
}

/// Text outside fenced blocks.
fn outside_fences(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
            continue;
        }
        if !inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Where a word was found: how sure we are that it is meant as a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    /// The value of a path argument.
    Argument,
    /// An argument of a shell command.
    Shell,
    /// The agent's prose.
    Prose,
}

/// Extensions that make a bare word a file name (`setup.py`, `README.md`).
const EXTENSIONS: [&str; 44] = [
    "rs", "py", "pyi", "pyx", "ts", "tsx", "js", "jsx", "mjs", "cjs", "json", "jsonl", "md", "rst",
    "toml", "yaml", "yml", "txt", "sh", "c", "h", "cc", "cpp", "hpp", "go", "java", "kt", "rb",
    "php", "cfg", "ini", "lock", "html", "css", "scss", "sql", "xml", "csv", "proto", "dcm", "log",
    "diff", "patch", "ipynb",
];

/// `word` as a path key (see the module documentation for the rule), or `None`.
fn path_key(word: &str, context: Context) -> Option<String> {
    if word.contains("://") || word.starts_with("http") {
        return None;
    }
    // `src/a.py:12:5`, `a.py,` → the path.
    let word = word.split(':').next().unwrap_or_default();
    let word = word.trim_end_matches(['.', ',', ';', '!', '?']);
    let word = word.strip_prefix("./").unwrap_or(word);
    let word = word.trim_end_matches('/');
    let clean = word
        .chars()
        .all(|c| c.is_alphanumeric() || "/._-@+~".contains(c));
    if !clean
        || word.chars().count() < 3
        || word.contains("//")
        || !word.chars().any(|c| c.is_alphabetic())
    {
        return None;
    }
    let has_extension = last_segment_extension(word).is_some();
    let known_extension = last_segment_extension(word)
        .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
    if !word.contains('/') {
        let path = match context {
            Context::Argument => true,
            Context::Shell | Context::Prose => known_extension,
        };
        return path.then(|| word.to_string());
    }
    let rooted = word.starts_with(['/', '~']) || word.starts_with("../");
    let segments: Vec<&str> = word
        .split('/')
        .filter(|s| !s.is_empty() && *s != "." && *s != ".." && *s != "~")
        .collect();
    if segments.is_empty() || segments.iter().all(|s| !s.chars().any(char::is_alphabetic)) {
        return None;
    }
    let path = match context {
        Context::Argument | Context::Shell => true,
        Context::Prose => has_extension || segments.len() >= 3 || (rooted && segments.len() >= 2),
    };
    path.then(|| word.to_string())
}

/// The extension of a path's last segment (`a.py` → `py`): one to eight characters, a letter
/// among them, after a non-empty stem.
fn last_segment_extension(path: &str) -> Option<&str> {
    let last = path.rsplit('/').next()?;
    let (stem, extension) = last.rsplit_once('.')?;
    let ok = !stem.is_empty()
        && (1..=8).contains(&extension.len())
        && extension.chars().all(|c| c.is_ascii_alphanumeric())
        && extension.chars().any(|c| c.is_ascii_alphabetic());
    ok.then_some(extension)
}

/// Error types and `test_…` names anywhere in `text`.
fn errors_and_tests(text: &str, found: &mut Artifacts) {
    static ERROR: LazyLock<Regex> =
        LazyLock::new(|| compiled(r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b"));
    static TEST: LazyLock<Regex> = LazyLock::new(|| compiled(r"\btest_\w+"));
    for m in ERROR.find_iter(text) {
        found.insert_exact(ArtifactCategory::Error, m.as_str());
    }
    for m in TEST.find_iter(text) {
        found.insert_exact(ArtifactCategory::Test, m.as_str());
    }
}

/// Names declared with `def`, `class`, `fn`, `function`, `struct`, `enum` or `trait`.
fn declared_symbols(text: &str, found: &mut Artifacts) {
    static DECLARED: LazyLock<Regex> = LazyLock::new(|| {
        compiled(r"\b(?:def|class|fn|function|struct|enum|trait)\s+([A-Za-z_][A-Za-z0-9_]*)")
    });
    for caps in DECLARED.captures_iter(text) {
        if let Some(name) = caps.get(1) {
            found.insert_exact(ArtifactCategory::Symbol, name.as_str());
        }
    }
}

#[cfg(test)]
mod tests;
