//! Following a trace file that is still being written (`troupe trace --follow`).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::parse::TraceFileError;
use crate::telemetry::jsonl::TraceLine;

/// Reads the lines appended to a trace file since the last poll; a line still being written
/// waits for its newline.
#[derive(Debug)]
pub struct TraceFollower {
    path: PathBuf,
    offset: u64,
    pending: Vec<u8>,
    line_number: usize,
    lines: Vec<TraceLine>,
}

impl TraceFollower {
    /// Follow `path` from its beginning (it need not exist yet).
    pub fn new(path: impl AsRef<Path>) -> Self {
        TraceFollower {
            path: path.as_ref().to_path_buf(),
            offset: 0,
            pending: Vec::new(),
            line_number: 0,
            lines: Vec::new(),
        }
    }

    /// Every record read so far.
    pub fn lines(&self) -> &[TraceLine] {
        &self.lines
    }

    /// Read what was appended; returns how many new records arrived.
    ///
    /// # Errors
    /// [`TraceFileError`] when the file cannot be read or a complete line is not a record.
    pub fn poll(&mut self) -> Result<usize, TraceFileError> {
        let io = |source| TraceFileError::Io {
            path: self.path.clone(),
            cause: source,
        };
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io(e)),
        };
        let len = file.metadata().map_err(io)?.len();
        if len < self.offset {
            // Truncated and rewritten: start over.
            self.offset = 0;
            self.pending.clear();
            self.line_number = 0;
            self.lines.clear();
        }
        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let mut fresh = Vec::new();
        file.read_to_end(&mut fresh).map_err(io)?;
        self.offset += fresh.len() as u64;
        self.pending.extend_from_slice(&fresh);
        let mut added = 0;
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let raw: Vec<u8> = self.pending.drain(..=end).collect();
            self.line_number += 1;
            let text = String::from_utf8_lossy(&raw[..raw.len() - 1]).into_owned();
            if text.trim().is_empty() {
                continue;
            }
            let record = serde_json::from_str(&text).map_err(|e| TraceFileError::BadLine {
                path: self.path.clone(),
                line: self.line_number,
                reason: e.to_string(),
            })?;
            self.lines.push(record);
            added += 1;
        }
        Ok(added)
    }
}
