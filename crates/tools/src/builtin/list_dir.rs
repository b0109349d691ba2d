//! `list_dir`: the entries of a directory, optionally recursive, bounded.

use std::fmt::Write as _;
use std::path::Path;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::read_file::describe_io;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;
use crate::workspace::{WorkspacePath, resolve};

/// Entries listed at most; beyond that the model is told to list a subdirectory.
const MAX_ENTRIES: usize = 1000;
/// How deep a recursive listing goes.
const MAX_DEPTH: usize = 12;
/// Directories a recursive listing shows but does not expand: generated or VCS data.
pub(crate) const SKIPPED_DIRS: &[&str] = &[".git", "target", "node_modules"];

/// The `list_dir` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

/// Arguments of `list_dir`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ListDirArgs {
    /// Directory to list, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Also list subdirectories' entries (default: false).
    #[serde(default)]
    pub recursive: bool,
}

#[async_trait]
impl Tool for ListDir {
    type Args = ListDirArgs;
    type Output = String;

    fn name(&self) -> &str {
        "list_dir"
    }

    fn description(&self) -> &str {
        "List a directory of the workspace: one entry per line with its path relative to the \
         workspace root, `/` after directories, sizes of files. Set recursive to include \
         subdirectories."
    }

    async fn call(&self, ctx: &ToolContext, args: ListDirArgs) -> Result<String, ToolError> {
        let dir = resolve(&ctx.root, args.path.as_deref().unwrap_or("."))?;
        let meta = tokio::fs::metadata(&dir.absolute)
            .await
            .map_err(|e| ToolError::respond(describe_io(&dir.relative, &e)))?;
        if !meta.is_dir() {
            return Err(ToolError::respond(format!(
                "\"{}\" is a file, not a directory; use read_file to read it",
                dir.relative
            )));
        }
        let cancel = ctx.cancel.clone();
        let recursive = args.recursive;
        tokio::task::spawn_blocking(move || list(&dir, recursive, &cancel))
            .await
            .map_err(|e| ToolError::respond(format!("list_dir failed: {e}")))?
    }
}

struct Listing {
    lines: Vec<String>,
    truncated: bool,
}

fn list(
    dir: &WorkspacePath,
    recursive: bool,
    cancel: &CancellationToken,
) -> Result<String, ToolError> {
    let mut listing = Listing {
        lines: Vec::new(),
        truncated: false,
    };
    let prefix = if dir.relative == "." {
        String::new()
    } else {
        format!("{}/", dir.relative)
    };
    walk(&dir.absolute, &prefix, recursive, 0, cancel, &mut listing)
        .map_err(|e| ToolError::respond(describe_io(&dir.relative, &e)))?;
    let mut out = String::new();
    if listing.lines.is_empty() {
        let _ = write!(out, "\"{}\" is empty", dir.relative);
    } else {
        out = listing.lines.join("\n");
    }
    if listing.truncated {
        let _ = write!(
            out,
            "\n[listing stopped at {MAX_ENTRIES} entries; list a subdirectory to see the rest]"
        );
    }
    Ok(out)
}

fn walk(
    dir: &Path,
    prefix: &str,
    recursive: bool,
    depth: usize,
    cancel: &CancellationToken,
    listing: &mut Listing,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if listing.lines.len() >= MAX_ENTRIES || cancel.is_cancelled() {
            listing.truncated = true;
            return Ok(());
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{prefix}{name}");
        // file_type() does not follow symlinks, so a link to a directory is never descended
        // into: the walk cannot leave the workspace.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            let target = std::fs::read_link(entry.path())
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            listing.lines.push(format!("{path} -> {target}"));
        } else if kind.is_dir() {
            let expand = recursive && depth < MAX_DEPTH && !SKIPPED_DIRS.contains(&name.as_str());
            listing.lines.push(if recursive && !expand {
                format!("{path}/ (not expanded)")
            } else {
                format!("{path}/")
            });
            if expand {
                walk(
                    &entry.path(),
                    &format!("{path}/"),
                    recursive,
                    depth + 1,
                    cancel,
                    listing,
                )?;
            }
        } else {
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            listing.lines.push(format!("{path} ({size} bytes)"));
        }
    }
    Ok(())
}
