//! What a session log holds: its records, and the session they restore.

use serde::{Deserialize, Serialize};

use crate::conversation::Conversation;
use crate::message::{MessageId, StoredMessage};

use super::schema::{SessionSchema, Untyped, as_json_value};

/// The log format's version, written in the header record.
pub const SESSION_FORMAT_VERSION: u32 = 1;

/// One line of a session log; `S` types the agent state it carries ([`SessionSchema`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[serde(bound(serialize = "", deserialize = ""))]
#[non_exhaustive]
pub enum SessionRecord<S: SessionSchema = Untyped> {
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
    Compaction(CompactionRecord<S>),
    /// The agent switched models.
    ModelChange {
        /// The new model's name.
        model: String,
    },
    /// The file ledger as of now (the latest one wins on load).
    Ledger {
        /// The ledger.
        #[serde(serialize_with = "as_json_value")]
        ledger: S::Ledger,
    },
    /// The conversation was cleared (`/clear`); ids stay unique afterwards.
    Clear,
    /// The records since the previous commit form a complete turn.
    Commit,
}

impl<S: SessionSchema> SessionRecord<S> {
    /// The record's `type`, as written in the log.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionRecord::Session { .. } => "session",
            SessionRecord::Message(_) => "message",
            SessionRecord::Compaction(_) => "compaction",
            SessionRecord::ModelChange { .. } => "model_change",
            SessionRecord::Ledger { .. } => "ledger",
            SessionRecord::Clear => "clear",
            SessionRecord::Commit => "commit",
        }
    }
}

/// What a compaction changed, enough to restore the conversation and its summary state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(serialize = "", deserialize = ""))]
pub struct CompactionRecord<S: SessionSchema = Untyped> {
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
    /// The archive entries themselves, so that a resumed session can still `expand`; may be empty
    /// when the archive lives elsewhere.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "as_json_value"
    )]
    pub archive_entries: Vec<S::ArchiveEntry>,
    /// The file ledger at compaction time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "as_json_value"
    )]
    pub ledger: Option<S::Ledger>,
    /// The compaction report.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "as_json_value"
    )]
    pub report: Option<S::Report>,
}

impl<S: SessionSchema> Default for CompactionRecord<S> {
    fn default() -> Self {
        CompactionRecord {
            messages: Vec::new(),
            summary: None,
            read_files: Vec::new(),
            modified_files: Vec::new(),
            archived: Vec::new(),
            archive_entries: Vec::new(),
            ledger: None,
            report: None,
        }
    }
}

/// A conversation restored from its log.
#[derive(Debug, Clone, PartialEq)]
pub struct Session<S: SessionSchema = Untyped> {
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
    pub ledger: Option<S::Ledger>,
    /// Ids of every archived original.
    pub archived: Vec<MessageId>,
    /// Every archive entry recorded in the log, oldest first.
    pub archive_entries: Vec<S::ArchiveEntry>,
    /// The report of the latest compaction.
    pub last_report: Option<S::Report>,
    /// Compactions applied.
    pub compactions: usize,
    /// Committed records applied.
    pub records: usize,
    /// What was skipped (a torn last line, an unfinished turn).
    pub warnings: Vec<String>,
}

impl<S: SessionSchema> Default for Session<S> {
    fn default() -> Self {
        Session {
            conversation: Conversation::default(),
            agent: None,
            model: None,
            previous_summary: None,
            read_files: Vec::new(),
            modified_files: Vec::new(),
            ledger: None,
            archived: Vec::new(),
            archive_entries: Vec::new(),
            last_report: None,
            compactions: 0,
            records: 0,
            warnings: Vec::new(),
        }
    }
}
