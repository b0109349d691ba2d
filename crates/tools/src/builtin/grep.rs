//! `grep`: a regex search over the workspace, bounded.

use std::fmt::Write as _;
use std::io::Read;
use std::os::fd::OwnedFd;

use async_trait::async_trait;
use regex::{Regex, RegexBuilder};
use rustix::fs::{FileType, OFlags};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::list_dir::SKIPPED_DIRS;
use super::read_file::blocking;
use super::text::looks_binary;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;
use crate::workspace::{
    FileError, RootDir, WorkspacePath, check_regular, open_entry, sorted_entries,
};

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
        let root = RootDir::open(&ctx.root)?;
        let start = root.resolve(args.path.as_deref().unwrap_or("."))?;
        let limit = args
            .max_matches
            .unwrap_or(DEFAULT_MAX_MATCHES)
            .clamp(1, MAX_MATCHES);
        let cancel = ctx.cancel.clone();
        let pattern = args.pattern.clone();
        blocking(move || -> Result<String, ToolError> {
            // Non-blocking, so a FIFO named as the start is refused, not waited on.
            let fd = root.open_beneath(&start, OFlags::RDONLY | OFlags::NONBLOCK)?;
            let stat = rustix::fs::fstat(&fd).map_err(|e| FileError::io(&start.relative, e))?;
            let start_kind = FileType::from_raw_mode(stat.st_mode);
            if start_kind != FileType::Directory {
                check_regular(&start.relative, &stat)?;
            }
            Ok(search(
                &regex, &pattern, &start, fd, start_kind, limit, &cancel,
            ))
        })
        .await?
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
    fd: OwnedFd,
    kind: FileType,
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
    if kind == FileType::Directory {
        search.dir(&fd, &prefix);
    } else {
        search.file(fd, &start.relative);
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

    fn dir(&mut self, dir: &OwnedFd, prefix: &str) {
        let Ok(entries) = sorted_entries(dir) else {
            return;
        };
        for entry in entries {
            if self.full() {
                return;
            }
            let path = if prefix.is_empty() {
                entry.name.clone()
            } else {
                format!("{prefix}/{}", entry.name)
            };
            // Entries are opened O_NOFOLLOW from their directory's descriptor: symlinks are
            // skipped, never followed, so the search stays inside the workspace; FIFOs and
            // devices are skipped, so it never blocks.
            match entry.kind() {
                Some(FileType::Directory) if !SKIPPED_DIRS.contains(&entry.name.as_str()) => {
                    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
                    if let Ok(sub) = open_entry(dir, &entry.raw, flags) {
                        self.dir(&sub, &path);
                    }
                }
                Some(FileType::RegularFile) if entry.size() <= MAX_FILE_BYTES => {
                    let flags = OFlags::RDONLY | OFlags::NONBLOCK;
                    if let Ok(file) = open_entry(dir, &entry.raw, flags) {
                        self.file(file, &path);
                    }
                }
                _ => {}
            }
        }
    }

    fn file(&mut self, file: OwnedFd, path: &str) {
        // Checked again on the open file: the entry may have been replaced since it was listed.
        let Ok(stat) = rustix::fs::fstat(&file) else {
            return;
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
            || u64::try_from(stat.st_size).unwrap_or(u64::MAX) > MAX_FILE_BYTES
        {
            return;
        }
        let mut bytes = Vec::new();
        if std::fs::File::from(file)
            .take(MAX_FILE_BYTES)
            .read_to_end(&mut bytes)
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
