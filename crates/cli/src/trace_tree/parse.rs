//! Reading a trace file for the tree: the one reader of `troupe_protocol::trace` (a bad line is
//! said, skipped and counted, never the end of the file), and its I/O error with the path.

use std::path::{Path, PathBuf};

use super::escape::escape_control;
use troupe_protocol::trace::TraceRead;

/// Why a trace file could not be read: only I/O — what is in it is read by the one rule.
#[derive(Debug, thiserror::Error)]
pub enum TraceFileError {
    /// The file could not be read.
    #[error("cannot read the trace file {}: {cause}", escape_control(&path.display().to_string()))]
    Io {
        /// The trace file's path.
        path: PathBuf,
        /// The read error.
        cause: std::io::Error,
    },
}

/// Read a trace file by the one rule ([`troupe_protocol::trace::read_trace_file`]).
///
/// # Errors
/// [`TraceFileError::Io`] when it cannot be read.
pub fn read_trace_file(path: &Path) -> Result<TraceRead, TraceFileError> {
    troupe_protocol::trace::read_trace_file(path).map_err(|cause| TraceFileError::Io {
        path: path.to_path_buf(),
        cause,
    })
}
