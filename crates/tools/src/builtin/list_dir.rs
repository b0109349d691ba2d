//! `list_dir`: the entries of a directory, optionally recursive, bounded.

use std::fmt::Write as _;
use std::os::fd::OwnedFd;

use async_trait::async_trait;
use rustix::fs::{FileType, OFlags};
use rustix::io::Errno;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::read_file::blocking;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;
use crate::workspace::{DirEntry, FileError, RootDir, WorkspacePath, open_entry, sorted_entries};

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
        let root = RootDir::open(&ctx.root)?;
        let dir = root.resolve(args.path.as_deref().unwrap_or("."))?;
        let cancel = ctx.cancel.clone();
        let recursive = args.recursive;
        blocking(move || -> Result<String, ToolError> {
            let fd = root.open_dir(&dir).map_err(|e| match e {
                FileError::NotADirectory { path } => ToolError::respond(format!(
                    "\"{path}\" is a file, not a directory; use read_file to read it"
                )),
                other => other.into(),
            })?;
            list(&root, &dir, &fd, recursive, &cancel)
        })
        .await?
    }
}

struct Listing {
    lines: Vec<String>,
    truncated: bool,
}

fn list(
    root: &RootDir,
    dir: &WorkspacePath,
    fd: &OwnedFd,
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
    walk(root, fd, &prefix, recursive, 0, cancel, &mut listing)
        .map_err(|e| FileError::io(&dir.relative, e))?;
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
    root: &RootDir,
    dir: &OwnedFd,
    prefix: &str,
    recursive: bool,
    depth: usize,
    cancel: &CancellationToken,
    listing: &mut Listing,
) -> Result<(), Errno> {
    for entry in sorted_entries(dir)? {
        if listing.lines.len() >= MAX_ENTRIES || cancel.is_cancelled() {
            listing.truncated = true;
            return Ok(());
        }
        let path = format!("{prefix}{}", entry.name);
        let Some(kind) = entry.kind() else {
            continue;
        };
        if kind == FileType::Symlink {
            listing.lines.push(format!(
                "{path} -> {}",
                symlink_target(root, dir, &entry, &path)
            ));
        } else if kind == FileType::Directory {
            let expand =
                recursive && depth < MAX_DEPTH && !SKIPPED_DIRS.contains(&entry.name.as_str());
            listing.lines.push(if recursive && !expand {
                format!("{path}/ (not expanded)")
            } else {
                format!("{path}/")
            });
            // Opened O_NOFOLLOW from its parent's descriptor: a directory swapped for a symlink
            // meanwhile is not descended into, so the walk cannot leave the workspace.
            if expand
                && let Ok(sub) = open_entry(dir, &entry.raw, OFlags::RDONLY | OFlags::DIRECTORY)
            {
                walk(
                    root,
                    &sub,
                    &format!("{path}/"),
                    recursive,
                    depth + 1,
                    cancel,
                    listing,
                )?;
            }
        } else {
            listing
                .lines
                .push(format!("{path} ({} bytes)", entry.size()));
        }
    }
    Ok(())
}

/// Where a symlink points, shown only when that is inside the workspace: the listing must not
/// tell the model about paths it may not use.
fn symlink_target(root: &RootDir, dir: &OwnedFd, entry: &DirEntry, path: &str) -> String {
    let inside = root.resolve(path).is_ok();
    match rustix::fs::readlinkat(dir, entry.raw.as_c_str(), Vec::new()) {
        Ok(target) if inside => target.to_string_lossy().into_owned(),
        _ if inside => "(unreadable)".to_string(),
        _ => "(outside the workspace)".to_string(),
    }
}
