//! Sessions: each conversation as an append-only JSONL log that survives a killed process.
//!
//! A log is a sequence of [`SessionRecord`]s, one JSON object per line. Records are queued with
//! [`SessionLog::append`] and written by [`SessionLog::flush`] — at a turn boundary — followed by a
//! `{"type":"commit"}` line and an fsync. Loading applies only committed records, so a process
//! killed in the middle of writing a turn loses that turn and nothing else:
//!
//! - an unterminated last line (the write was cut off) is skipped with a warning;
//! - complete records after the last commit (the turn was not finished) are dropped with a warning;
//! - any other damage — a complete line that is not a record — is an error naming the line.
//!
//! ```no_run
//! use troupe_runtime::session::{SessionLog, SessionRecord};
//! use troupe_runtime::ChatMessage;
//! # fn main() -> Result<(), troupe_runtime::session::SessionError> {
//! let (mut log, session) = SessionLog::open("chat.jsonl".as_ref())?;
//! for w in &session.warnings { eprintln!("warning: {w}"); }
//! let mut conversation = session.conversation;
//! let id = conversation.push(ChatMessage::user("hello"));
//! log.append_message(conversation.get(id).unwrap_or(&ChatMessage::user("hello")));
//! log.flush()?; // turn boundary: written and fsynced
//! # Ok(()) }
//! ```

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::conversation::Conversation;
use crate::message::{ChatMessage, MessageId, StoredMessage};

/// The log format's version, written in the header record.
pub const SESSION_FORMAT_VERSION: u32 = 1;

/// One line of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionRecord {
    /// The first record: what wrote the log.
    Session {
        /// [`SESSION_FORMAT_VERSION`] of the writer.
        version: u32,
        /// The agent whose conversation this is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// Milliseconds since the Unix epoch.
        created_ms: u64,
    },
    /// A message appended to the conversation (with its id and kind).
    Message(StoredMessage),
    /// The conversation was compacted.
    Compaction(CompactionRecord),
    /// The agent switched models.
    ModelChange {
        /// The new model's name.
        model: String,
    },
    /// The file ledger as of now (the latest one wins on load).
    Ledger {
        /// The ledger in its serde form (`troupe_tools::FileLedger`).
        ledger: Value,
    },
    /// The conversation was cleared (`/clear`); ids stay unique afterwards.
    Clear,
    /// The records since the previous commit form a complete turn.
    Commit,
}

/// What a compaction changed, enough to restore the conversation and its summary state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// The conversation after compaction (it replaces the conversation so far).
    pub messages: Vec<StoredMessage>,
    /// The summary text (the body of the `<summary>` message), if a summary was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Files read so far (`<read-files>`).
    #[serde(default)]
    pub read_files: Vec<String>,
    /// Files modified so far (`<modified-files>`).
    #[serde(default)]
    pub modified_files: Vec<String>,
    /// Ids of the original messages this compaction moved to the archive.
    #[serde(default)]
    pub archived: Vec<MessageId>,
    /// The archive entries themselves (`troupe_compaction::ArchiveEntry`'s serde form), so that
    /// a resumed session can still `expand`; may be empty when the archive lives elsewhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archive_entries: Vec<Value>,
    /// The file ledger at compaction time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<Value>,
    /// The compaction report (`troupe_compaction::CompactionReport`'s serde form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Value>,
}

/// A conversation restored from its log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    /// The conversation as of the last committed turn.
    pub conversation: Conversation,
    /// The agent named in the header.
    pub agent: Option<String>,
    /// The last model switched to.
    pub model: Option<String>,
    /// The latest compaction summary (the "previous summary" the next compaction merges into).
    pub previous_summary: Option<String>,
    /// Files read, over all compactions.
    pub read_files: Vec<String>,
    /// Files modified, over all compactions.
    pub modified_files: Vec<String>,
    /// The latest file ledger.
    pub ledger: Option<Value>,
    /// Ids of every archived original.
    pub archived: Vec<MessageId>,
    /// Every archive entry recorded in the log, oldest first.
    pub archive_entries: Vec<Value>,
    /// The report of the latest compaction (`troupe_compaction::CompactionReport`'s serde form).
    pub last_report: Option<Value>,
    /// Compactions applied.
    pub compactions: usize,
    /// Committed records applied.
    pub records: usize,
    /// What was skipped (a torn last line, an unfinished turn).
    pub warnings: Vec<String>,
}

/// Why a session log could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// An I/O error.
    #[error("session log {path}: {source}")]
    Io {
        /// The log.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A complete line that is not a session record: the log is damaged.
    #[error("session log {path}:{line}: corrupt record: {reason}")]
    Corrupt {
        /// The log.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The records parse, but what they hold does not fit the reader (an agent's ledger, archive
    /// or compaction report of the wrong shape).
    #[error("session log {path}: {reason}")]
    State {
        /// The log.
        path: PathBuf,
        /// What does not fit.
        reason: String,
    },
    /// A record could not be serialized.
    #[error("session log {path}: cannot serialize a record: {reason}")]
    Serialize {
        /// The log.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// Adds `items` not yet in `into`, keeping order.
fn union_into(into: &mut Vec<String>, items: &[String]) {
    for item in items {
        if !into.contains(item) {
            into.push(item.clone());
        }
    }
}

/// Replays committed records into a [`Session`].
#[derive(Default)]
struct Replayer {
    session: Session,
    messages: Vec<ChatMessage>,
    /// The highest id ever seen, so ids stay unique after a clear or compaction.
    max_id: u64,
}

impl Replayer {
    fn apply(&mut self, record: SessionRecord) {
        self.session.records += 1;
        match record {
            SessionRecord::Session { agent, .. } => self.session.agent = agent,
            SessionRecord::Message(stored) => {
                self.max_id = self.max_id.max(stored.id.0);
                self.messages.push(stored.into());
            }
            SessionRecord::Compaction(c) => {
                self.messages = c.messages.into_iter().map(ChatMessage::from).collect();
                self.max_id = self
                    .messages
                    .iter()
                    .map(|m| m.id.0)
                    .chain(c.archived.iter().map(|id| id.0))
                    .fold(self.max_id, u64::max);
                if c.summary.is_some() {
                    self.session.previous_summary = c.summary;
                }
                union_into(&mut self.session.read_files, &c.read_files);
                union_into(&mut self.session.modified_files, &c.modified_files);
                self.session.archived.extend(c.archived);
                self.session.archive_entries.extend(c.archive_entries);
                if c.ledger.is_some() {
                    self.session.ledger = c.ledger;
                }
                if c.report.is_some() {
                    self.session.last_report = c.report;
                }
                self.session.compactions += 1;
            }
            SessionRecord::ModelChange { model } => self.session.model = Some(model),
            SessionRecord::Ledger { ledger } => self.session.ledger = Some(ledger),
            SessionRecord::Clear => {
                // A fresh start: the old summary and files no longer describe the context.
                self.messages.clear();
                self.session.previous_summary = None;
                self.session.read_files.clear();
                self.session.modified_files.clear();
                self.session.ledger = None;
                self.session.last_report = None;
            }
            SessionRecord::Commit => {}
        }
    }

    fn finish(mut self) -> Session {
        let stored: Vec<StoredMessage> = self.messages.iter().map(StoredMessage::from).collect();
        let next_id = self.max_id + 1;
        // Conversation's serde form is the one way to restore an id counter past cleared ids.
        let restored =
            serde_json::from_value(serde_json::json!({ "next_id": next_id, "messages": stored }));
        self.session.conversation =
            restored.unwrap_or_else(|_| Conversation::from_stored(self.messages));
        self.session
    }
}

/// The result of scanning a log: the session and where its committed part ends.
struct Scan {
    session: Session,
    committed_len: u64,
}

fn scan(path: &Path, bytes: &[u8]) -> Result<Scan, SessionError> {
    let mut replayer = Replayer::default();
    let mut pending: Vec<SessionRecord> = Vec::new();
    let mut pending_from_line = 0;
    let mut committed_len = 0u64;
    let mut offset = 0usize;
    let mut line_no = 0usize;
    let mut warnings = Vec::new();
    while offset < bytes.len() {
        line_no += 1;
        let Some(rel_end) = bytes[offset..].iter().position(|b| *b == b'\n') else {
            warnings.push(format!(
                "{}:{line_no}: skipped an incomplete last line ({} bytes): the writer was cut off",
                path.display(),
                bytes.len() - offset
            ));
            break;
        };
        let line = &bytes[offset..offset + rel_end];
        offset += rel_end + 1;
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
        if record == SessionRecord::Commit {
            for r in pending.drain(..) {
                replayer.apply(r);
            }
            committed_len = offset as u64;
        } else {
            if pending.is_empty() {
                pending_from_line = line_no;
            }
            pending.push(record);
        }
    }
    if !pending.is_empty() {
        warnings.push(format!(
            "{}:{pending_from_line}: dropped {} record(s) of an unfinished turn (no commit after them)",
            path.display(),
            pending.len()
        ));
    }
    let mut session = replayer.finish();
    session.warnings = warnings;
    Ok(Scan {
        session,
        committed_len,
    })
}

/// Restore the session a log describes (read-only).
///
/// # Errors
/// [`SessionError::Io`] when the file cannot be read, [`SessionError::Corrupt`] naming the line
/// when a complete line is not a record.
pub fn load(path: &Path) -> Result<Session, SessionError> {
    let bytes = std::fs::read(path).map_err(|source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(scan(path, &bytes)?.session)
}

/// An open session log, appending at turn boundaries.
#[derive(Debug)]
pub struct SessionLog {
    path: PathBuf,
    file: File,
    pending: Vec<SessionRecord>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl SessionLog {
    /// Open the log at `path` for appending, creating it (with a header) if missing, and return
    /// the session it holds.
    ///
    /// An existing log is loaded first; an unfinished tail (torn line, uncommitted records) is cut
    /// off the file so that new records follow the last complete turn — the returned session's
    /// `warnings` say what was cut.
    ///
    /// # Errors
    /// [`SessionError`] when the file cannot be read or written or is corrupt (then nothing is
    /// changed on disk).
    pub fn open(path: &Path) -> Result<(SessionLog, Session), SessionError> {
        Self::open_for(path, None)
    }

    /// [`SessionLog::open`], naming the agent in the header of a new log.
    ///
    /// # Errors
    /// As [`SessionLog::open`].
    pub fn open_for(
        path: &Path,
        agent: Option<&str>,
    ) -> Result<(SessionLog, Session), SessionError> {
        let io = |source| SessionError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let existing = match std::fs::read(path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(e)),
        };
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        let mut log = SessionLog {
            path: path.to_path_buf(),
            file,
            pending: Vec::new(),
        };
        match existing {
            Some(bytes) if !bytes.is_empty() => {
                let scan = scan(path, &bytes)?;
                if scan.committed_len < bytes.len() as u64 {
                    log.file.set_len(scan.committed_len).map_err(io)?;
                    log.file.sync_data().map_err(io)?;
                }
                Ok((log, scan.session))
            }
            _ => {
                log.append(SessionRecord::Session {
                    version: SESSION_FORMAT_VERSION,
                    agent: agent.map(str::to_string),
                    created_ms: now_ms(),
                });
                log.flush()?;
                sync_parent_dir(path);
                let session = Session {
                    agent: agent.map(str::to_string),
                    ..Session::default()
                };
                Ok((log, session))
            }
        }
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queue a record; nothing is written until [`SessionLog::flush`].
    pub fn append(&mut self, record: SessionRecord) {
        self.pending.push(record);
    }

    /// Queue a message record.
    pub fn append_message(&mut self, message: &ChatMessage) {
        self.append(SessionRecord::Message(StoredMessage::from(message)));
    }

    /// Drop the queued records (after a failed [`SessionLog::flush`], when the caller will queue
    /// the same changes again).
    pub fn discard_pending(&mut self) {
        self.pending.clear();
    }

    /// Records queued and not yet flushed.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Write the queued records and a commit line in one write, then fsync: the turn is durable.
    /// Does nothing when nothing is queued.
    ///
    /// # Errors
    /// [`SessionError`] when serializing or writing fails; the queue is kept so a later flush
    /// can retry.
    pub fn flush(&mut self) -> Result<(), SessionError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut text = String::new();
        for record in self
            .pending
            .iter()
            .chain(std::iter::once(&SessionRecord::Commit))
        {
            let line = serde_json::to_string(record).map_err(|e| SessionError::Serialize {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
            text.push_str(&line);
            text.push('\n');
        }
        let io = |source| SessionError::Io {
            path: self.path.clone(),
            source,
        };
        let start = self.file.metadata().map_err(io)?.len();
        if let Err(e) = self
            .file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.sync_data())
        {
            // A partial write must not stay behind: later records and their commit would make
            // it part of a committed turn. Cut the file back to the last commit.
            let _ = self.file.set_len(start);
            return Err(io(e));
        }
        self.pending.clear();
        Ok(())
    }
}

/// Make a new file's directory entry durable too (best effort: not every platform can).
fn sync_parent_dir(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn temp_path(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("troupe-session-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("log.jsonl")
    }

    /// Three committed turns of two messages each.
    fn write_three_turns(path: &Path) -> Conversation {
        let (mut log, _) = SessionLog::open_for(path, Some("solo")).unwrap();
        let mut c = Conversation::new();
        for turn in 1..=3 {
            for m in [
                ChatMessage::user(format!("q{turn}")),
                ChatMessage::assistant(format!("a{turn}")),
            ] {
                let id = c.push(m);
                log.append_message(c.get(id).unwrap());
            }
            log.flush().unwrap();
        }
        c
    }

    #[test]
    fn committed_turns_round_trip() {
        let path = temp_path("round-trip");
        let written = write_three_turns(&path);
        let session = load(&path).unwrap();
        assert_eq!(session.conversation, written);
        assert_eq!(session.agent.as_deref(), Some("solo"));
        assert!(session.warnings.is_empty());
    }

    #[test]
    fn a_torn_last_line_loses_only_that_turn_and_open_repairs_it() {
        let path = temp_path("torn");
        write_three_turns(&path);
        let full = std::fs::read(&path).unwrap();
        // Cut the file in the middle of every byte of the last turn's lines: each loses turn 3 only.
        let turn3_start = {
            let text = String::from_utf8(full.clone()).unwrap();
            text.match_indices("\"q3\"").next().unwrap().0
        };
        let turn3_line_start = full[..turn3_start]
            .iter()
            .rposition(|b| *b == b'\n')
            .unwrap()
            + 1;
        for cut in turn3_line_start + 1..full.len() {
            std::fs::write(&path, &full[..cut]).unwrap();
            let session = load(&path).unwrap();
            let texts: Vec<String> = session
                .conversation
                .messages()
                .iter()
                .map(|m| m.text())
                .collect();
            assert_eq!(texts, ["q1", "a1", "q2", "a2"], "cut at {cut}");
            assert!(
                !session.warnings.is_empty(),
                "cut at {cut}: the loss is reported"
            );
        }
        // Reopening cuts the unfinished tail so the next turn follows turn 2.
        let (mut log, session) = SessionLog::open(&path).unwrap();
        assert_eq!(session.conversation.len(), 4);
        let mut c = session.conversation;
        let id = c.push(ChatMessage::user("q3 again"));
        assert_eq!(id, MessageId(5));
        log.append_message(c.get(id).unwrap());
        log.flush().unwrap();
        let session = load(&path).unwrap();
        assert!(session.warnings.is_empty(), "{:?}", session.warnings);
        assert_eq!(session.conversation.last().unwrap().text(), "q3 again");
    }

    #[test]
    fn a_corrupt_complete_line_is_an_error_naming_it() {
        let path = temp_path("corrupt");
        write_three_turns(&path);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[3] = "{\"type\":\"message\",\"id\":\"m2\"";
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("log.jsonl:4: corrupt record"), "{err}");
        // Opening a corrupt log changes nothing on disk.
        let before = std::fs::read(&path).unwrap();
        assert!(SessionLog::open(&path).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn compaction_clear_and_model_change_are_restored() {
        let path = temp_path("records");
        let (mut log, _) = SessionLog::open(&path).unwrap();
        let mut c = Conversation::new();
        for text in ["task", "a1", "q2", "a2"] {
            let id = c.push(ChatMessage::user(text));
            log.append_message(c.get(id).unwrap());
        }
        log.flush().unwrap();
        let summary_id = c.allocate_id();
        let mut summary = ChatMessage::user("<summary>did things</summary>");
        summary.id = summary_id;
        let kept: Vec<ChatMessage> =
            vec![c.messages()[0].clone(), summary, c.messages()[3].clone()];
        log.append(SessionRecord::Compaction(CompactionRecord {
            messages: kept.iter().map(StoredMessage::from).collect(),
            summary: Some("did things".into()),
            read_files: vec!["a.rs".into()],
            modified_files: vec!["b.rs".into()],
            archived: vec![MessageId(2), MessageId(3)],
            archive_entries: vec![serde_json::json!({"original": "m2"})],
            ledger: Some(serde_json::json!({"files": {}})),
            report: None,
        }));
        log.append(SessionRecord::ModelChange {
            model: "gpt".into(),
        });
        log.flush().unwrap();
        let session = load(&path).unwrap();
        assert_eq!(session.conversation.len(), 3);
        assert_eq!(session.conversation.next_id(), MessageId(6));
        assert_eq!(session.previous_summary.as_deref(), Some("did things"));
        assert_eq!(session.read_files, ["a.rs"]);
        assert_eq!(session.archived, [MessageId(2), MessageId(3)]);
        assert_eq!(session.archive_entries.len(), 1);
        assert_eq!(session.model.as_deref(), Some("gpt"));
        assert!(session.ledger.is_some());

        log.append(SessionRecord::Clear);
        log.flush().unwrap();
        let session = load(&path).unwrap();
        assert!(session.conversation.is_empty());
        assert_eq!(
            session.conversation.next_id(),
            MessageId(6),
            "ids stay unique after a clear"
        );
        assert_eq!(session.previous_summary, None);
        assert_eq!(session.archived.len(), 2, "the archive survives a clear");
    }
}
