//! Reading a log: which records are committed, and what they restore.

use std::path::Path;

use super::error::SessionError;
use super::files::read_regular;
use super::records::{SESSION_FORMAT_VERSION, Session, SessionRecord};
use super::replay::Replayer;

/// The result of scanning a log: the session and where its committed part ends.
pub(super) struct Scan {
    pub(super) session: Session,
    /// The length of the committed part: everything after it is an unfinished commit.
    pub(super) committed_len: u64,
    /// The last commit line lost only its newline: it counts, and the newline must be written
    /// before anything is appended after it.
    pub(super) missing_newline: bool,
}

/// The commit line a flush ends every turn with.
fn is_commit(line: &[u8]) -> bool {
    serde_json::from_slice::<SessionRecord>(line).is_ok_and(|r| matches!(r, SessionRecord::Commit))
}

pub(super) fn scan(path: &Path, bytes: &[u8]) -> Result<Scan, SessionError> {
    scan_commits(path, bytes, &mut |_, _| {})
}

/// The records of one commit, each with its 1-based line.
pub(super) type CommitRecords = [(SessionRecord, usize)];

/// [`scan`], showing `on_commit` each commit's records (with their lines) and where the commit
/// ends in `bytes`, before they are applied.
pub(super) fn scan_commits(
    path: &Path,
    bytes: &[u8],
    on_commit: &mut dyn FnMut(&CommitRecords, u64),
) -> Result<Scan, SessionError> {
    let mut replayer = Replayer::default();
    let mut pending: Vec<(SessionRecord, usize)> = Vec::new();
    let mut committed_len = 0u64;
    let mut missing_newline = false;
    let mut offset = 0usize;
    let mut line_no = 0usize;
    let mut warnings = Vec::new();
    while offset < bytes.len() {
        line_no += 1;
        let (line, next) = match bytes[offset..].iter().position(|b| *b == b'\n') {
            Some(rel_end) => (&bytes[offset..offset + rel_end], offset + rel_end + 1),
            // A whole commit line that lost only its newline still ends its turn: the writer
            // got every byte of the turn out.
            None if is_commit(&bytes[offset..]) => {
                missing_newline = true;
                (&bytes[offset..], bytes.len())
            }
            None => {
                warnings.push(format!(
                    "{}:{line_no}: skipped an incomplete last line ({} bytes): the writer was cut off",
                    path.display(),
                    bytes.len() - offset
                ));
                break;
            }
        };
        offset = next;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let corrupt = |reason: String| SessionError::Corrupt {
            path: path.to_path_buf(),
            line: line_no,
            reason,
        };
        let text = std::str::from_utf8(line).map_err(|e| corrupt(format!("not UTF-8: {e}")))?;
        let record: SessionRecord =
            serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        if let SessionRecord::Session { version, .. } = &record
            && *version > SESSION_FORMAT_VERSION
        {
            return Err(corrupt(format!(
                "written by a newer troupe (format {version}; this one reads {SESSION_FORMAT_VERSION})"
            )));
        }
        if matches!(record, SessionRecord::Commit) {
            let invalid = |(line, reason)| SessionError::Invalid {
                path: path.to_path_buf(),
                line,
                reason,
            };
            on_commit(&pending, offset as u64);
            for (r, line) in pending.drain(..) {
                replayer.apply(r, line).map_err(invalid)?;
            }
            replayer.check_turn_complete().map_err(invalid)?;
            committed_len = offset as u64;
        } else {
            pending.push((record, line_no));
        }
    }
    if let Some((_, first_line)) = pending.first() {
        warnings.push(format!(
            "{}:{first_line}: dropped {} record(s) of an unfinished commit (no commit line)",
            path.display(),
            pending.len()
        ));
    }
    let mut session = replayer.finish();
    session.warnings = warnings;
    Ok(Scan {
        session,
        committed_len,
        missing_newline,
    })
}

/// Restore the session a log describes (read-only; takes no lock).
///
/// # Errors
/// [`SessionError::NotRegularFile`] for a FIFO, device or directory (refused without reading
/// it); [`SessionError::Io`] when the file cannot be read; [`SessionError::Corrupt`] naming the
/// line when a complete line is not a record, or holds a ledger, archive entry or report of
/// another shape; [`SessionError::Invalid`] naming the line when the committed records do not
/// form a valid conversation.
pub fn load(path: &Path) -> Result<Session, SessionError> {
    let bytes = read_regular(path)?;
    Ok(scan(path, &bytes)?.session)
}
