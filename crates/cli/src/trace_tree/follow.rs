//! Following a trace file that is still being written (`troupe trace --follow`).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::parse::TraceFileError;
use troupe_protocol::trace::TraceLine;

/// Reads the lines appended to a trace file since the last poll; a line still being written
/// waits for its newline.
///
/// Linear in what arrives: each poll scans only bytes it has not scanned before and drops the
/// lines it parsed from its buffer in one move, however many lines (or polls) there are.
#[derive(Debug)]
pub struct TraceFollower {
    path: PathBuf,
    offset: u64,
    /// Bytes read but not yet parsed: the start of a line still being written.
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no newline.
    scanned: usize,
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
            scanned: 0,
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
            self.scanned = 0;
            self.line_number = 0;
            self.lines.clear();
        }
        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let before = self.pending.len();
        file.read_to_end(&mut self.pending).map_err(io)?;
        self.offset += (self.pending.len() - before) as u64;
        let mut added = 0;
        let mut consumed = 0;
        let mut result = Ok(());
        while let Some(end) = self.pending[self.scanned..]
            .iter()
            .position(|b| *b == b'\n')
            .map(|at| self.scanned + at)
        {
            self.scanned = end + 1;
            let line = self.line_number + 1;
            let text = String::from_utf8_lossy(&self.pending[consumed..end]);
            if !text.trim().is_empty() {
                match serde_json::from_str(&text) {
                    Ok(record) => {
                        self.lines.push(record);
                        added += 1;
                    }
                    Err(e) => {
                        // The bad line stays unread: polling again reports it again.
                        result = Err(TraceFileError::BadLine {
                            path: self.path.clone(),
                            line,
                            reason: e.to_string(),
                        });
                        break;
                    }
                }
            }
            self.line_number = line;
            consumed = end + 1;
        }
        self.pending.drain(..consumed);
        self.scanned = if result.is_err() {
            0
        } else {
            self.pending.len()
        };
        result?;
        Ok(added)
    }
}
