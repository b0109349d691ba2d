//! Why a confined file operation failed, in words a model can act on.

use std::io;

use crate::error::ToolError;

use super::PathError;

/// Why a file tool could not open, read or replace a path beneath the workspace root.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The path leads outside the root (also when a symlink was swapped in after the check).
    #[error(transparent)]
    Path(#[from] PathError),
    /// A file was wanted, the path is a directory.
    #[error("\"{path}\" is a directory, not a file")]
    IsDirectory {
        /// The path relative to the root.
        path: String,
    },
    /// A directory was wanted, the path is something else.
    #[error("\"{path}\" is a file, not a directory")]
    NotADirectory {
        /// The path relative to the root.
        path: String,
    },
    /// A FIFO, socket or device: reading one can block forever or never end.
    #[error(
        "\"{path}\" is a {kind}, not a regular file; the file tools only read and write regular files"
    )]
    NotRegular {
        /// The path relative to the root.
        path: String,
        /// What it is instead (`FIFO`, `socket`, …).
        kind: &'static str,
    },
    /// Writing would change the file under its other names too, which may lie outside the root.
    #[error(
        "\"{path}\" has {links} hard links, so changing it would also change it under its other \
         names, which may be outside the workspace; refusing to modify it"
    )]
    HardLinked {
        /// The path relative to the root.
        path: String,
        /// Its link count.
        links: u64,
    },
    /// Any other I/O failure.
    #[error("{}", describe_io(.path, .cause))]
    Io {
        /// The path relative to the root.
        path: String,
        /// What the system said (part of the message, so not a `source()`).
        cause: io::Error,
    },
}

impl FileError {
    /// An [`FileError::Io`] for `path`.
    pub(crate) fn io(path: &str, cause: impl Into<io::Error>) -> Self {
        FileError::Io {
            path: path.to_string(),
            cause: cause.into(),
        }
    }
}

impl From<FileError> for ToolError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Path(path) => path.into(),
            other => ToolError::respond(other.to_string()),
        }
    }
}

/// An I/O failure in words a model can act on.
pub(crate) fn describe_io(path: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => {
            format!("file \"{path}\" does not exist; use list_dir or grep to find the right path")
        }
        io::ErrorKind::PermissionDenied => format!("permission denied for \"{path}\""),
        _ => format!("cannot access \"{path}\": {e}"),
    }
}
