//! `grep`: a regex search over the workspace, bounded.

use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;

use async_trait::async_trait;
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::list_dir::SKIPPED_DIRS;
use super::read_file::describe_io;
use super::text::looks_binary;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;
use crate::workspace::{WorkspacePath, resolve};

/// Matches returned when the model does not say.
const DEFAULT_MAX_MATCHES: usize = 100;
/// Matches returned at most, whatever the model asks.
const MAX_MATCHES: usize = 1000;
/// Characters of a matching line shown.
const MAX_LINE_CHARS: usize = 240;
/// Files larger than this are skipped (generated data, logs).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The `grep` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grep;

/// Arguments of `grep`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// Regular expression (Rust regex syntax) to search for, line by line.
    pub pattern: String,
    /// File or directory to search, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Match without regard to case (default: false).
    #[serde(default)]
    pub case_insensitive: bool,
    /// Most matching lines to return (default 100, at most 1000).
    #[serde(default)]
    pub max_matches: Option<usize>,
}

#[async_trait]
impl Tool for Grep {
    type Args = GrepArgs;
    type Output = String;

    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Search the workspace's text files for a regular expression. Returns matching lines as \
         `path:line: text`. Skips binary files, symlinks and .git/target/node_modules."
    }

    async fn call(&self, ctx: &ToolContext, args: GrepArgs) -> Result<String, ToolError> {
        let regex = RegexBuilder::new(&args.pattern)
            .case_insensitive(args.case_insensitive)
            .build()
            .map_err(|e| {
                ToolError::respond(format!(
                    "invalid regular expression {:?}: {e}; escape special characters such as \
                     ( ) [ ] {{ }} . * + ? with a backslash",
                    args.pattern
                ))
            })?;
        let start = resolve(&ctx.root, args.path.as_deref().unwrap_or("."))?;
        if let Err(e) = tokio::fs::metadata(&start.absolute).await {
            return Err(ToolError::respond(describe_io(&start.relative, &e)));
        }
        let limit = args
            .max_matches
            .unwrap_or(DEFAULT_MAX_MATCHES)
            .clamp(1, MAX_MATCHES);
        let cancel = ctx.cancel.clone();
        let pattern = args.pattern.clone();
        tokio::task::spawn_blocking(move || search(&regex, &pattern, &start, limit, &cancel))
            .await
            .map_err(|e| ToolError::respond(format!("grep failed: {e}")))
    }
}

struct Search<'a> {
    regex: &'a Regex,
    limit: usize,
    cancel: &'a CancellationToken,
    lines: Vec<String>,
    files_searched: usize,
    truncated: bool,
}

fn search(
    regex: &Regex,
    pattern: &str,
    start: &WorkspacePath,
    limit: usize,
    cancel: &CancellationToken,
) -> String {
    let mut search = Search {
        regex,
        limit,
        cancel,
        lines: Vec::new(),
        files_searched: 0,
        truncated: false,
    };
    let prefix = if start.relative == "." {
        String::new()
    } else {
        start.relative.clone()
    };
    if start.absolute.is_file() {
        search.file(&start.absolute, &start.relative);
    } else {
        search.dir(&start.absolute, &prefix);
    }
    let mut out = if search.lines.is_empty() {
        format!(
            "no matches for /{pattern}/ in \"{}\" ({} files searched)",
            start.relative, search.files_searched
        )
    } else {
        search.lines.join("\n")
    };
    if search.truncated {
        let _ = write!(
            out,
            "\n[stopped after {} matches; narrow the pattern or the path to see the rest]",
            search.limit
        );
    }
    out
}

impl Search<'_> {
    /// Whether to stop: a match beyond the limit was seen, or the call was cancelled.
    fn full(&mut self) -> bool {
        if self.cancel.is_cancelled() {
            self.truncated = true;
        }
        self.truncated
    }

    fn dir(&mut self, dir: &Path, prefix: &str) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = read.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if self.full() {
                return;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            // Symlinks are skipped, never followed, so the search stays inside the workspace.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && !SKIPPED_DIRS.contains(&name.as_str()) {
                self.dir(&entry.path(), &path);
            } else if kind.is_file() {
                self.file(&entry.path(), &path);
            }
        }
    }

    fn file(&mut self, file: &Path, path: &str) {
        let Ok(meta) = std::fs::metadata(file) else {
            return;
        };
        if meta.len() > MAX_FILE_BYTES {
            return;
        }
        let mut bytes = Vec::new();
        if std::fs::File::open(file)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .is_err()
        {
            return;
        }
        if looks_binary(&bytes) {
            return;
        }
        self.files_searched += 1;
        let text = String::from_utf8_lossy(&bytes);
        for (index, line) in text.lines().enumerate() {
            if self.full() {
                return;
            }
            if self.regex.is_match(line) {
                if self.lines.len() == self.limit {
                    self.truncated = true;
                    return;
                }
                self.lines
                    .push(format!("{path}:{}: {}", index + 1, shorten(line)));
            }
        }
    }
}

fn shorten(line: &str) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        line.to_string()
    } else {
        let head: String = line.chars().take(MAX_LINE_CHARS).collect();
        format!("{head}…")
    }
}
