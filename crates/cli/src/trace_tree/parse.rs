//! Reading a trace file: whole lines are spans or events; a torn last line is a run still being
//! written (or killed), not an error.

use std::path::{Path, PathBuf};

use super::escape::escape_control;
use troupe_protocol::trace::TraceLine;

/// Why a trace file could not be read.
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
    /// A complete line is not a trace record.
    #[error(
        "{}:{line}: not a troupe trace line: {}",
        escape_control(&path.display().to_string()),
        escape_control(reason)
    )]
    BadLine {
        /// The trace file's path.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        reason: String,
    },
}

/// The records of a trace file, and what was skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedTrace {
    /// Records in file order.
    pub lines: Vec<TraceLine>,
    /// Warnings about skipped input (a torn last line).
    pub warnings: Vec<String>,
}

/// Parse the text of a trace file named `path` (used in messages only).
///
/// Every newline-terminated line must be a record; a last line without its newline that does not
/// parse is skipped with a warning (the writer was cut off or is still writing it). Blank lines
/// are ignored.
///
/// # Errors
/// [`TraceFileError::BadLine`] for a complete line that is not a record.
pub fn parse_trace_text(path: &Path, text: &str) -> Result<ParsedTrace, TraceFileError> {
    let mut parsed = ParsedTrace::default();
    let complete = text.ends_with('\n');
    let raw: Vec<&str> = text.split_terminator('\n').collect();
    for (i, line) in raw.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<TraceLine>(line) {
            Ok(record) => parsed.lines.push(record),
            Err(_) if i + 1 == raw.len() && !complete => parsed.warnings.push(format!(
                "{}:{}: skipped an incomplete last line ({} bytes): the run was cut off or is still writing",
                path.display(),
                i + 1,
                line.len()
            )),
            Err(e) => {
                return Err(TraceFileError::BadLine {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(parsed)
}

/// Read and parse a trace file.
///
/// # Errors
/// As [`parse_trace_text`], plus [`TraceFileError::Io`].
pub fn read_trace_file(path: &Path) -> Result<ParsedTrace, TraceFileError> {
    let bytes = std::fs::read(path).map_err(|source| TraceFileError::Io {
        path: path.to_path_buf(),
        cause: source,
    })?;
    parse_trace_text(path, &String::from_utf8_lossy(&bytes))
}
