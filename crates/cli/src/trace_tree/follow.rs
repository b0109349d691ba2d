//! Following a trace file that is still being written (`troupe trace --follow`).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::parse::TraceFileError;
use troupe_protocol::trace::{TraceLine, TraceRead, TraceReader};

/// Reads the lines appended to a trace file since the last poll, by the one reader's rule (a
/// bad line is said and counted once, and reading goes on); a line still being written waits
/// for its newline.
///
/// Linear in what arrives: each poll reads only bytes it has not read before, and the reader
/// scans each once ([`TraceReader`]).
#[derive(Debug)]
pub struct TraceFollower {
    path: PathBuf,
    offset: u64,
    reader: TraceReader,
    read: TraceRead,
}

impl TraceFollower {
    /// Follow `path` from its beginning (it need not exist yet).
    pub fn new(path: impl AsRef<Path>) -> Self {
        TraceFollower {
            path: path.as_ref().to_path_buf(),
            offset: 0,
            reader: TraceReader::new(),
            read: TraceRead::default(),
        }
    }

    /// Every record read so far.
    pub fn lines(&self) -> &[TraceLine] {
        &self.read.lines
    }

    /// What was read so far, bad lines included.
    pub fn read(&self) -> &TraceRead {
        &self.read
    }

    /// Read what was appended; returns how many new records arrived.
    ///
    /// # Errors
    /// [`TraceFileError`] when the file cannot be read.
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
            self.reader.restart();
            self.read = TraceRead::default();
        }
        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        self.offset += bytes.len() as u64;
        let before = self.read.lines.len();
        self.reader.feed(&bytes, &mut self.read);
        Ok(self.read.lines.len() - before)
    }
}
