//! Confining paths to the workspace root.
//!
//! A path is resolved the way the kernel would (component by component, following every
//! symlink, including dangling ones, by reading the link) and only then compared with the
//! canonical root, so `..`, absolute paths and symlinks cannot reach outside, and a file that does
//! not exist yet is judged by where its parent really is.
//!
//! That judgement names the rule a path broke; the file tools then open through [`RootDir`],
//! which enforces it in the kernel (`openat2` with `RESOLVE_BENEATH`), so a path swapped for a
//! symlink between the check and the open is refused too.

mod dir_entries;
mod file_error;
mod replace;
mod root_dir;

pub(crate) use dir_entries::{DirEntry, open_entry, sorted_entries};
pub use file_error::FileError;
pub(crate) use replace::check_single_link;
pub use root_dir::RootDir;
pub(crate) use root_dir::check_regular;

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::error::ToolError;

/// Symlink hops allowed while resolving one path (Linux's own limit is 40).
const MAX_SYMLINK_HOPS: usize = 40;

/// A path inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspacePath {
    /// The fully resolved absolute path (symlinks followed).
    pub absolute: PathBuf,
    /// The path relative to the root with `/` separators; `.` for the root itself.
    pub relative: String,
}

/// How a requested path left the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EscapeKind {
    /// An absolute path outside the root.
    AbsolutePath,
    /// `..` components climbing above the root.
    ParentTraversal,
    /// A symlink inside the workspace that points outside it.
    Symlink,
}

/// Why a path could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path resolves outside the workspace root.
    #[error("{}", escape_message(.requested, *.kind))]
    Escape {
        /// The path as requested.
        requested: String,
        /// How it escaped.
        kind: EscapeKind,
    },
    /// The workspace root itself is unusable.
    #[error("the workspace root {root} cannot be used: {cause}")]
    Root {
        /// The configured root, as given.
        root: String,
        /// The error opening or inspecting it.
        cause: io::Error,
    },
    /// Resolving the path failed (too many symlinks, unreadable link, empty path).
    #[error("cannot resolve path \"{requested}\": {reason}")]
    Unresolvable {
        /// The path as requested.
        requested: String,
        /// What stopped the resolution (symlink loop, unreadable link, empty path).
        reason: String,
    },
}

fn escape_message(requested: &str, kind: EscapeKind) -> String {
    let why = match kind {
        EscapeKind::AbsolutePath => "it is an absolute path outside the workspace root",
        EscapeKind::ParentTraversal => "its \"..\" components climb above the workspace root",
        EscapeKind::Symlink => "it goes through a symlink that points outside the workspace root",
    };
    format!(
        "path \"{requested}\" refused: {why}; use a path relative to the workspace root, e.g. \
         \"src/main.rs\""
    )
}

impl From<PathError> for ToolError {
    fn from(e: PathError) -> Self {
        match e {
            PathError::Escape { .. } => ToolError::PathEscape(e.to_string()),
            PathError::Root { .. } => ToolError::Fatal(e.to_string()),
            PathError::Unresolvable { .. } => ToolError::RespondToModel(e.to_string()),
        }
    }
}

/// Resolve `requested` (relative to `root`, or absolute) to a path inside `root`.
///
/// The file need not exist; its nearest existing ancestor decides where it really is.
pub fn resolve(root: &Path, requested: &str) -> Result<WorkspacePath, PathError> {
    if requested.is_empty() {
        return Err(PathError::Unresolvable {
            requested: requested.to_string(),
            reason: "the path is empty; use \".\" for the workspace root".to_string(),
        });
    }
    let canonical_root = root.canonicalize().map_err(|source| PathError::Root {
        root: root.display().to_string(),
        cause: source,
    })?;
    let requested_path = Path::new(requested);
    let start = if requested_path.is_absolute() {
        requested_path.to_path_buf()
    } else {
        canonical_root.join(requested_path)
    };
    let absolute = resolve_symlinks(&start).map_err(|reason| PathError::Unresolvable {
        requested: requested.to_string(),
        reason,
    })?;
    match absolute.strip_prefix(&canonical_root) {
        Ok(inside) => Ok(WorkspacePath {
            relative: to_slash(inside),
            absolute,
        }),
        Err(_) => Err(PathError::Escape {
            requested: requested.to_string(),
            kind: classify_escape(root, &canonical_root, requested_path),
        }),
    }
}

/// The path relative to the root, `/`-separated, `.` for the root.
pub fn to_slash(relative: &Path) -> String {
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

/// Which rule the path broke: judged lexically first, so a symlink is blamed only when the
/// path's text alone stays inside.
fn classify_escape(root: &Path, canonical_root: &Path, requested: &Path) -> EscapeKind {
    if requested.is_absolute() {
        let lexical = normalize_lexically(requested);
        if !lexical.starts_with(canonical_root) && !lexical.starts_with(root) {
            return EscapeKind::AbsolutePath;
        }
        return EscapeKind::Symlink;
    }
    if normalize_lexically(&canonical_root.join(requested)).starts_with(canonical_root) {
        EscapeKind::Symlink
    } else {
        EscapeKind::ParentTraversal
    }
}

fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The kernel's view of an absolute path: every symlink followed, `..` applied after it.
/// Components that do not exist are kept as they are.
fn resolve_symlinks(start: &Path) -> Result<PathBuf, String> {
    let mut pending: VecDeque<OsString> = VecDeque::new();
    let mut resolved = PathBuf::new();
    push_components(start, &mut resolved, &mut pending, true);
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&part);
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err("too many levels of symbolic links".to_string());
                }
                let target = std::fs::read_link(&next)
                    .map_err(|e| format!("cannot read symlink {}: {e}", next.display()))?;
                // The link's target replaces it, relative to the link's directory.
                let mut rest: VecDeque<OsString> = VecDeque::new();
                push_components(&target, &mut resolved, &mut rest, target.is_absolute());
                rest.extend(pending.drain(..));
                pending = rest;
            }
            _ => resolved = next,
        }
    }
    Ok(resolved)
}

/// Queue `path`'s components; an absolute path first resets `resolved` to its root.
fn push_components(
    path: &Path,
    resolved: &mut PathBuf,
    pending: &mut VecDeque<OsString>,
    absolute: bool,
) {
    for component in path.components() {
        match component {
            Component::Prefix(p) if absolute => *resolved = PathBuf::from(p.as_os_str()),
            Component::RootDir if absolute => resolved.push(component.as_os_str()),
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
            Component::ParentDir => pending.push_back(OsString::from("..")),
            Component::Normal(name) => pending.push_back(name.to_os_string()),
        }
    }
}
