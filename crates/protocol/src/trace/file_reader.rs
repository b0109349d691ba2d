//! Reading a trace file: the one reader of [`TraceLine`]s, which `troupe trace` (its tree and
//! `--follow`) and the live view's `troupe ui --trace` both use, with one rule for a line that is
//! not a record — say it, keep going, count it.
//!
//! A line is read as UTF-8 with every byte that is not replaced by U+FFFD (a writer cut inside a
//! character, or a file cut and appended to, leaves such bytes): the record is kept and the
//! repair said. A complete line that is then not a record is skipped and said. A last line
//! without its newline is a run cut off or still writing: read when it is a whole record, else
//! skipped as incomplete. Blank lines are nothing. The first [`NAMED_BAD_LINES`] such lines are
//! named by number and why; every one is counted ([`TraceRead::bad_lines`]).
//!
//! The reader ([`TraceReader`]) takes the bytes in pieces as they come, so following a file
//! scans each byte once; [`read_trace_bytes`] and [`read_trace_file`] read a whole one.

use std::fmt;
use std::path::Path;

use super::TraceLine;

/// How many bad lines a [`TraceRead`] names; the others are counted.
pub const NAMED_BAD_LINES: usize = 10;

/// What reading (part of) a trace file gave: its records in file order, and what of it could
/// not be read as it was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceRead {
    /// The records, in file order.
    pub lines: Vec<TraceLine>,
    /// The first [`NAMED_BAD_LINES`] lines skipped or repaired.
    pub named: Vec<BadLine>,
    /// How many lines were skipped or repaired in all.
    pub bad_lines: usize,
}

/// A line that was not read as it stood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based line number in the file.
    pub line: usize,
    /// The line's length in bytes (without its newline).
    pub bytes: usize,
    /// What was wrong, and what the reader did.
    pub problem: LineProblem,
}

/// What was wrong with a [`BadLine`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineProblem {
    /// A complete line that is not a trace record (the JSON error): skipped.
    NotARecord(String),
    /// A last line without its newline that is not a whole record: skipped.
    Incomplete,
    /// A record with bytes that are not UTF-8, read with U+FFFD in their place: kept.
    NotUtf8,
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = self.line;
        match &self.problem {
            LineProblem::NotARecord(reason) => {
                write!(f, "{line}: skipped, not a troupe trace line: {reason}")
            }
            LineProblem::Incomplete => write!(
                f,
                "{line}: skipped an incomplete last line ({} bytes): the run was cut off or is \
                 still writing",
                self.bytes
            ),
            LineProblem::NotUtf8 => write!(
                f,
                "{line}: bytes that are not UTF-8 were read as U+FFFD (a write cut inside a \
                 character)"
            ),
        }
    }
}

impl TraceRead {
    /// What to tell a reader of `path`: each named bad line (`PATH:LINE: …`), then how many
    /// more there were. Empty when every line was read as it stood.
    pub fn warnings(&self, path: &Path) -> Vec<String> {
        let shown = path.display();
        let mut out: Vec<String> = self
            .named
            .iter()
            .map(|bad| format!("{shown}:{bad}"))
            .collect();
        if self.bad_lines > self.named.len() {
            out.push(format!(
                "{shown}: {} more lines skipped or repaired ({} in all)",
                self.bad_lines - self.named.len(),
                self.bad_lines
            ));
        }
        out
    }

    fn note(&mut self, bad: BadLine) {
        self.bad_lines += 1;
        if self.named.len() < NAMED_BAD_LINES {
            self.named.push(bad);
        }
    }

    /// Read one line's bytes (without its newline) by the module's rule.
    fn read_line(&mut self, line: usize, bytes: &[u8], complete: bool) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let text = String::from_utf8_lossy(bytes);
        let repaired = matches!(text, std::borrow::Cow::Owned(_));
        let bad = |problem| BadLine {
            line,
            bytes: bytes.len(),
            problem,
        };
        match serde_json::from_str::<TraceLine>(&text) {
            Ok(record) => {
                self.lines.push(record);
                if repaired {
                    self.note(bad(LineProblem::NotUtf8));
                }
            }
            Err(_) if !complete => self.note(bad(LineProblem::Incomplete)),
            Err(e) => self.note(bad(LineProblem::NotARecord(e.to_string()))),
        }
    }
}

/// A trace file read in pieces as they come: each complete line is read once, a line still
/// being written waits for its newline (or [`TraceReader::finish`]).
///
/// Linear in what it is given: each [`TraceReader::feed`] scans only bytes it has not scanned
/// before, and drops the lines it read from its buffer in one move.
#[derive(Debug, Clone, Default)]
pub struct TraceReader {
    /// Bytes given but not yet read: the start of a line still being written.
    pending: Vec<u8>,
    /// How many lines were read (complete or not).
    line: usize,
}

impl TraceReader {
    /// A reader at the start of a file.
    pub fn new() -> Self {
        TraceReader::default()
    }

    /// Read the complete lines `bytes` finishes into `read`; a last piece without its newline
    /// is kept for the next call.
    pub fn feed(&mut self, bytes: &[u8], read: &mut TraceRead) {
        // Only the new bytes can hold the next newline: the pending ones held none.
        let mut start = 0;
        let mut from_pending = !self.pending.is_empty();
        for (at, _) in bytes.iter().enumerate().filter(|(_, b)| **b == b'\n') {
            self.line += 1;
            if from_pending {
                self.pending.extend_from_slice(&bytes[..at]);
                let line = std::mem::take(&mut self.pending);
                read.read_line(self.line, &line, true);
                from_pending = false;
            } else {
                read.read_line(self.line, &bytes[start..at], true);
            }
            start = at + 1;
        }
        self.pending.extend_from_slice(&bytes[start..]);
    }

    /// The end of the file: a last line without its newline is read, and skipped as
    /// incomplete unless it is a whole record.
    pub fn finish(&mut self, read: &mut TraceRead) {
        if self.pending.is_empty() {
            return;
        }
        self.line += 1;
        let line = std::mem::take(&mut self.pending);
        read.read_line(self.line, &line, false);
    }

    /// Start again at the beginning of a file (one that was truncated and written anew).
    pub fn restart(&mut self) {
        *self = TraceReader::default();
    }
}

/// The whole of a trace file's bytes, read by the one rule (see the module docs).
pub fn read_trace_bytes(bytes: &[u8]) -> TraceRead {
    let mut read = TraceRead::default();
    let mut reader = TraceReader::new();
    reader.feed(bytes, &mut read);
    reader.finish(&mut read);
    read
}

/// Read the trace file at `path` by the one rule (see the module docs).
///
/// # Errors
/// The I/O error of reading it; what is in it is never an error.
pub fn read_trace_file(path: &Path) -> std::io::Result<TraceRead> {
    std::fs::read(path).map(|bytes| read_trace_bytes(&bytes))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const EVENT: &str = r#"{"type":"event","time_unix_nano":1,"level":"WARN","message":"m"}"#;

    fn file(lines: &[&[u8]]) -> Vec<u8> {
        lines.iter().flat_map(|l| l.iter().copied()).collect()
    }

    #[test]
    fn a_bad_line_is_said_skipped_and_counted_and_the_rest_is_read() {
        // `€` cut to its first two bytes, inside the message's string.
        let at = EVENT.find(r#""m""#).unwrap() + 1;
        let torn_char = [
            &EVENT.as_bytes()[..at],
            b"\xe2\x82",
            &EVENT.as_bytes()[at..],
        ]
        .concat();
        let bytes = file(&[
            EVENT.as_bytes(),
            b"\nnot json\n\n",
            &torn_char,
            b"\n",
            EVENT.as_bytes(),
            b"\n{\"type\":\"sp",
        ]);
        let read = read_trace_bytes(&bytes);
        assert_eq!(
            read.lines.len(),
            3,
            "{:?}",
            read.warnings(Path::new("t.jsonl"))
        );
        assert_eq!(read.bad_lines, 3);
        let said = read.warnings(Path::new("t.jsonl"));
        assert!(
            said[0].starts_with("t.jsonl:2: skipped, not a troupe trace line: "),
            "{said:?}"
        );
        assert!(
            said[1].starts_with("t.jsonl:4: bytes that are not UTF-8"),
            "{said:?}"
        );
        assert!(said[2].starts_with("t.jsonl:6: skipped an incomplete last line (11 bytes)"));
    }

    #[test]
    fn past_the_named_ones_bad_lines_are_counted() {
        let bytes = "x\n".repeat(25);
        let read = read_trace_bytes(bytes.as_bytes());
        assert_eq!((read.named.len(), read.bad_lines), (NAMED_BAD_LINES, 25));
        let said = read.warnings(Path::new("t"));
        assert_eq!(said.len(), NAMED_BAD_LINES + 1);
        assert_eq!(
            said[NAMED_BAD_LINES],
            "t: 15 more lines skipped or repaired (25 in all)"
        );
    }

    #[test]
    fn pieces_read_as_the_whole_does_wherever_they_are_cut() {
        let bytes = file(&[
            EVENT.as_bytes(),
            b"\nbad\n",
            EVENT.as_bytes(),
            b"\n",
            EVENT.as_bytes(),
        ]);
        let whole = read_trace_bytes(&bytes);
        for cut in 0..bytes.len() {
            for second in cut..bytes.len() {
                let mut read = TraceRead::default();
                let mut reader = TraceReader::new();
                for piece in [&bytes[..cut], &bytes[cut..second], &bytes[second..]] {
                    reader.feed(piece, &mut read);
                }
                reader.finish(&mut read);
                assert_eq!(read, whole, "cut at {cut} and {second}");
            }
        }
    }

    #[test]
    fn a_whole_last_record_without_its_newline_is_read() {
        let read = read_trace_bytes(EVENT.as_bytes());
        assert_eq!((read.lines.len(), read.bad_lines), (1, 0));
    }
}
