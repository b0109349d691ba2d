//! `edit_file`: replace an exact string in a file, written back atomically.

use std::io::Read as _;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::read_file::blocking;
use super::text::{line_at, line_count, sha256_hex};
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;
use crate::workspace::{FileError, RootDir, WorkspacePath, check_single_link};
use troupe_protocol::FileAccess;

/// How many match locations an "ambiguous" message lists.
const LISTED_MATCHES: usize = 10;

/// The `edit_file` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

/// Arguments of `edit_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EditFileArgs {
    /// Path of the file, relative to the workspace root.
    pub path: String,
    /// The exact text to replace, including whitespace and indentation; it must occur exactly
    /// once unless replace_all is true.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one (default: false).
    #[serde(default)]
    pub replace_all: bool,
}

/// What `edit_file` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditFileOutput {
    /// The path relative to the workspace root.
    pub path: String,
    /// How many occurrences were replaced.
    pub replacements: usize,
    /// First line of the changed region in the new file (1-based).
    pub start_line: usize,
    /// Last line of the changed region in the new file (1-based, inclusive).
    pub end_line: usize,
    /// Lines in the file now.
    pub line_count: usize,
    /// Hex sha256 of the file now.
    pub sha256: String,
}

#[async_trait]
impl Tool for EditFile {
    type Args = EditFileArgs;
    type Output = EditFileOutput;

    fn name(&self) -> &str {
        "edit_file"
    }

    fn description(&self) -> &str {
        "Edit a file by replacing an exact string (old_string) with new_string. old_string must \
         match the file byte for byte and occur exactly once, unless replace_all is true. Read \
         the file first to copy the text exactly."
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        args: EditFileArgs,
    ) -> Result<EditFileOutput, ToolError> {
        let root = RootDir::open(&ctx.root)?;
        let file = root.resolve(&args.path)?;
        if args.old_string.is_empty() {
            return Err(ToolError::respond(
                "old_string is empty; give the exact text to replace (to create or overwrite a \
                 whole file, use write_file)",
            ));
        }
        if args.old_string == args.new_string {
            return Err(ToolError::respond(
                "old_string and new_string are identical, so the edit would change nothing",
            ));
        }
        let (root, bytes) = {
            let file = file.clone();
            blocking(move || read_for_edit(&root, &file).map(|bytes| (root, bytes))).await??
        };
        let text = String::from_utf8(bytes).map_err(|_| {
            ToolError::respond(format!(
                "\"{}\" is not UTF-8 text, so edit_file cannot edit it",
                file.relative
            ))
        })?;
        let matches: Vec<usize> = text
            .match_indices(&args.old_string)
            .map(|(at, _)| at)
            .collect();
        check_match_count(&file.relative, &text, &matches, args.replace_all)?;
        let edit = replace_at(&text, &matches, &args.old_string, &args.new_string);
        {
            let (file, text) = (file.clone(), edit.text.clone());
            blocking(move || root.write_atomically(&file, text.as_bytes())).await??;
        }
        let lines = line_count(&edit.text);
        let sha256 = sha256_hex(edit.text.as_bytes());
        ctx.ledger.record(
            ctx.ledger_entry(file.relative.clone(), FileAccess::Edited)
                .with_lines(edit.start_line, edit.end_line)
                .with_line_count(lines)
                .with_sha256(sha256.clone()),
        );
        Ok(EditFileOutput {
            path: file.relative,
            replacements: matches.len(),
            start_line: edit.start_line,
            end_line: edit.end_line,
            line_count: lines,
            sha256,
        })
    }
}

/// The file's bytes, refused before reading when it is not a regular file or has other names.
fn read_for_edit(root: &RootDir, file: &WorkspacePath) -> Result<Vec<u8>, FileError> {
    let (mut opened, stat) = root.open_regular(file)?;
    check_single_link(&file.relative, stat.st_nlink)?;
    let mut bytes = Vec::new();
    opened
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(&file.relative, e))?;
    Ok(bytes)
}

/// Refuse an absent string, or an ambiguous one unless every occurrence should change.
fn check_match_count(
    path: &str,
    text: &str,
    matches: &[usize],
    replace_all: bool,
) -> Result<(), ToolError> {
    match matches.len() {
        0 => Err(ToolError::respond(format!(
            "old_string was not found in \"{path}\"; it must match the file exactly, including \
             whitespace and indentation: read the file again and copy the text"
        ))),
        1 => Ok(()),
        n if !replace_all => {
            let lines: Vec<String> = matches
                .iter()
                .take(LISTED_MATCHES)
                .map(|at| line_at(text, *at).to_string())
                .collect();
            let more = if n > LISTED_MATCHES { ", …" } else { "" };
            Err(ToolError::respond(format!(
                "old_string is ambiguous: it occurs {n} times in \"{path}\" (at lines {}{more}); \
                 include more surrounding lines to make it unique, or set replace_all to true to \
                 replace all {n}",
                lines.join(", ")
            )))
        }
        _ => Ok(()),
    }
}

struct Edited {
    text: String,
    start_line: usize,
    end_line: usize,
}

/// Replace `old` at each offset in `matches` and note the lines the replacements now span.
fn replace_at(text: &str, matches: &[usize], old: &str, new: &str) -> Edited {
    let mut out = String::with_capacity(text.len());
    let mut copied_to = 0;
    let (mut first, mut last_end) = (0, 0);
    for (i, at) in matches.iter().enumerate() {
        out.push_str(&text[copied_to..*at]);
        if i == 0 {
            first = out.len();
        }
        out.push_str(new);
        last_end = out.len();
        copied_to = at + old.len();
    }
    out.push_str(&text[copied_to..]);
    let start_line = line_at(&out, first);
    // A deletion still touched the line it happened on.
    let end_line = line_at(&out, last_end.saturating_sub(1).max(first)).max(start_line);
    Edited {
        text: out,
        start_line,
        end_line,
    }
}
