//! `read_file`: a file's text, whole or a line range, with its line count and sha256.

use std::io::Read as _;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::text::{line_count, sha256_hex};
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;
use crate::workspace::{FileError, RootDir, WorkspacePath};
use troupe_protocol::FileAccess;

/// Files larger than this are refused rather than loaded whole into memory.
const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// Content returned per call at most, in whole lines: below the registry's default output cap,
/// so a long file comes back as valid JSON with an `end_line` to continue from instead of being
/// cut in the middle.
const MAX_CONTENT_BYTES: usize = 48 * 1024;

/// The `read_file` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

/// Arguments of `read_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// Path of the file, relative to the workspace root.
    pub path: String,
    /// First line to return, 1-based (default: 1).
    #[serde(default)]
    pub start_line: Option<usize>,
    /// Last line to return, 1-based and inclusive (default: the last line).
    #[serde(default)]
    pub end_line: Option<usize>,
}

/// What `read_file` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadFileOutput {
    /// The path relative to the workspace root.
    pub path: String,
    /// The requested lines (the whole file by default).
    pub content: String,
    /// First line returned (1-based); 0 for an empty file.
    pub start_line: usize,
    /// Last line returned (1-based, inclusive); 0 for an empty file.
    pub end_line: usize,
    /// Lines in the whole file.
    pub line_count: usize,
    /// Hex sha256 of the whole file.
    pub sha256: String,
    /// Whether fewer lines than asked were returned because they would not fit in one result;
    /// read on from `end_line + 1`.
    pub truncated: bool,
}

#[async_trait]
impl Tool for ReadFile {
    type Args = ReadFileArgs;
    type Output = ReadFileOutput;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a text file in the workspace. Returns its content (optionally only lines \
         start_line..=end_line), its total line count and its sha256. Long files come back in \
         parts: when truncated is true, call again with start_line = end_line + 1."
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        args: ReadFileArgs,
    ) -> Result<ReadFileOutput, ToolError> {
        let root = RootDir::open(&ctx.root)?;
        let file = root.resolve(&args.path)?;
        let bytes = {
            let file = file.clone();
            blocking(move || read_whole(&root, &file)).await??
        };
        let text = String::from_utf8_lossy(&bytes);
        let total = line_count(&text);
        let (start, end) = line_range(&file.relative, total, args.start_line, args.end_line)?;
        let (content, end) = select_lines(&text, start, end, MAX_CONTENT_BYTES);
        let truncated = total > 0 && end < args.end_line.unwrap_or(total).min(total);
        let sha256 = sha256_hex(&bytes);
        let mut entry = ctx
            .ledger_entry(file.relative.clone(), FileAccess::Read)
            .with_line_count(total)
            .with_sha256(sha256.clone());
        if args.start_line.is_some() || args.end_line.is_some() || truncated {
            entry = entry.with_lines(start, end);
        }
        ctx.ledger.record(entry);
        Ok(ReadFileOutput {
            path: file.relative,
            content,
            start_line: start,
            end_line: end,
            line_count: total,
            sha256,
            truncated,
        })
    }
}

/// The 1-based inclusive range to return, or a message saying why the request makes no sense.
fn line_range(
    path: &str,
    total: usize,
    start: Option<usize>,
    end: Option<usize>,
) -> Result<(usize, usize), ToolError> {
    if total == 0 {
        return Ok((0, 0));
    }
    let start = start.unwrap_or(1).max(1);
    let end = end.unwrap_or(total).min(total);
    if start > total {
        return Err(ToolError::respond(format!(
            "start_line {start} is past the end of \"{path}\", which has {total} lines"
        )));
    }
    if end < start {
        return Err(ToolError::respond(format!(
            "end_line {end} is before start_line {start}; ask for start_line <= end_line"
        )));
    }
    Ok((start, end))
}

/// Lines `start..=end` with their line endings kept, stopping early (at a line boundary) before
/// `max_bytes`; returns the text and the last line included. At least one line is returned,
/// cut at `max_bytes` if it alone is longer.
fn select_lines(text: &str, start: usize, end: usize, max_bytes: usize) -> (String, usize) {
    if start == 0 {
        return (String::new(), 0);
    }
    let mut out = String::new();
    let mut last = start - 1;
    for line in text
        .split_inclusive('\n')
        .skip(start - 1)
        .take(end + 1 - start)
    {
        if out.len() + line.len() > max_bytes {
            if out.is_empty() {
                let mut cut = max_bytes;
                while !line.is_char_boundary(cut) {
                    cut -= 1;
                }
                out.push_str(&line[..cut]);
                last += 1;
            }
            break;
        }
        out.push_str(line);
        last += 1;
    }
    (out, last)
}

/// The whole of `file`, opened beneath the root: a directory, a FIFO or a device is refused
/// before anything is read, and so is a file too large to load.
fn read_whole(root: &RootDir, file: &WorkspacePath) -> Result<Vec<u8>, ToolError> {
    let (mut opened, stat) = root.open_regular(file).map_err(|e| match e {
        FileError::IsDirectory { path } => ToolError::respond(format!(
            "\"{path}\" is a directory, not a file; use list_dir to see its entries"
        )),
        other => other.into(),
    })?;
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > MAX_FILE_BYTES {
        return Err(ToolError::respond(format!(
            "\"{}\" is {size} bytes, more than read_file loads ({MAX_FILE_BYTES}); use grep to \
             find the part you need",
            file.relative
        )));
    }
    let mut bytes = Vec::new();
    // `take` holds the promise even if the file grows after the fstat.
    (&mut opened)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(&file.relative, e))?;
    Ok(bytes)
}

/// Run blocking file work off the async threads.
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::respond(format!("the file operation failed: {e}")))
}
