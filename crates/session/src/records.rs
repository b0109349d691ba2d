//! What a session log holds: its records, and the session they restore.

use serde::{Deserialize, Serialize, Serializer};
use troupe_compaction::ArchiveEntry;
use troupe_protocol::FileLedger;
use troupe_protocol::{ApprovalId, CompactionReport};
use troupe_protocol::{Conversation, MessageId, ResponseFormat, StoredMessage, Usage};

/// The log format's version, written in the header record. Format 2 adds the step records
/// (`request_opened`, `model_answer`, `call_result`, `request_closed`, and `request_resuming`
/// for a resume after a supervisor restart) that commit a request step by step; a format 1 log
/// holds none of them and loads as it did.
pub const SESSION_FORMAT_VERSION: u32 = 2;

/// One line of a session log. The agent state it carries — the file ledger, archive entries, the
/// compaction report — is typed: a record of the wrong shape is refused at its line when the log
/// is read.
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
    /// The conversation was compacted (boxed: it holds the whole conversation and a report,
    /// while most records are one message).
    Compaction(Box<CompactionRecord>),
    /// The agent switched models.
    ModelChange {
        /// The new model's name.
        model: String,
    },
    /// The file ledger as of now (the latest one wins on load).
    Ledger {
        /// The ledger.
        #[serde(serialize_with = "as_json_value")]
        ledger: FileLedger,
    },
    /// The conversation was cleared (`/clear`); ids stay unique afterwards.
    Clear,
    /// The turn paused for approval with these calls of the last assistant message still
    /// unanswered: a commit may end with them open. On resume the agent asks again for those
    /// that need asking and runs the rest — except those in [`SessionRecord::CallsStarted`].
    Paused {
        /// The open calls, in call order.
        calls: Vec<PausedCall>,
    },
    /// These paused calls began to run: if the log ends before their results, they are answered
    /// as interrupted on resume, never run a second time.
    CallsStarted {
        /// Their tool call ids.
        call_ids: Vec<String>,
    },
    /// A request began (format 2, durable steps): its user message is the last message before
    /// this record. Until its [`SessionRecord::RequestClosed`] the request is in flight, and an
    /// agent that loads the log resumes it from its last committed step — as it was asked:
    /// a typed ask's answer format is recorded here, so the resumed model calls carry it too.
    /// (`{"type":"request_opened"}`, a request with no format, is the record format 2 began
    /// with.)
    RequestOpened {
        /// The answer format the request's model calls carry (a typed ask's schema).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_format: Option<LoggedFormat>,
        /// The request's id, when its caller gave one ([`Session::handled`]: a request of an
        /// id the log closed is answered from the log, never run again).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// The assistant message just before this record is a model's whole answer, which cost
    /// `usage` (format 2). Its tool calls are open ([`SessionRecord::Paused`] with `ask: false`)
    /// until their results.
    ModelAnswer {
        /// The call's token usage.
        usage: Usage,
    },
    /// A started call finished with this result (format 2): committed as it completes, before
    /// the rest of its batch; on resume it is answered with `content` and not run again.
    CallResult {
        /// The tool call's id.
        call_id: String,
        /// What the tool answered the model.
        content: String,
    },
    /// A failed request's conversation went back to where the request found it (format 2):
    /// `messages` replace the conversation, as a compaction's do, but nothing is summarized —
    /// it is not counted as a compaction. Written in the commit of the request's
    /// `request_closed` (rolled back). Logs written before this record said the same with a
    /// `compaction` record, and still load (counting it as one).
    RolledBack {
        /// The conversation as the request found it.
        messages: Vec<StoredMessage>,
        /// Archive entries a compaction of the request made and the agent keeps (the
        /// originals of messages now back in the conversation), when they were not logged
        /// yet: an emergency compaction is not committed before its retried call.
        #[serde(
            default,
            skip_serializing_if = "Vec::is_empty",
            serialize_with = "as_json_value"
        )]
        archive_entries: Vec<ArchiveEntry>,
        /// The latest compaction's report as the agent keeps it after the rollback (none:
        /// none), so a resumed agent reports the compaction the live one does (boxed: a report
        /// is large beside most records).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            serialize_with = "as_json_value"
        )]
        report: Option<Box<CompactionReport>>,
    },
    /// The request in flight ended (format 2): answered, failed, or rolled back (then the
    /// conversation was written back as it was before the request, in the same commit, as a
    /// `rolled_back` record).
    RequestClosed {
        /// How it ended.
        outcome: RequestOutcome,
    },
    /// The request in flight is resumed after its agent failed fatally mid-request and was
    /// rebuilt by its supervisor (format 2). Written before the resume runs anything: a second
    /// fatal failure of the same request finds it and closes the request as rolled back
    /// instead of resuming it again (a request that fails deterministically never loops).
    RequestResuming,
    /// The records since the previous commit form a complete turn.
    Commit,
}

/// How a request in flight ended ([`SessionRecord::RequestClosed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RequestOutcome {
    /// The model gave its final answer.
    Answered,
    /// The request failed and kept what it did (a fatal tool, too many turns, a spent budget).
    Failed,
    /// The request failed and its conversation went back to where the request found it.
    RolledBack,
}

impl SessionRecord {
    /// The record's `type`, as written in the log.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionRecord::Session { .. } => "session",
            SessionRecord::Message(_) => "message",
            SessionRecord::Compaction(_) => "compaction",
            SessionRecord::ModelChange { .. } => "model_change",
            SessionRecord::Ledger { .. } => "ledger",
            SessionRecord::Clear => "clear",
            SessionRecord::Paused { .. } => "paused",
            SessionRecord::CallsStarted { .. } => "calls_started",
            SessionRecord::RequestOpened { .. } => "request_opened",
            SessionRecord::ModelAnswer { .. } => "model_answer",
            SessionRecord::CallResult { .. } => "call_result",
            SessionRecord::RolledBack { .. } => "rolled_back",
            SessionRecord::RequestClosed { .. } => "request_closed",
            SessionRecord::RequestResuming => "request_resuming",
            SessionRecord::Commit => "commit",
        }
    }
}

/// A typed ask's answer format as the log keeps it ([`ResponseFormat`], which has no serde
/// form of its own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedFormat {
    /// The schema's name.
    pub name: String,
    /// The JSON Schema of the answer.
    pub schema: serde_json::Value,
    /// Whether a provider with a strict mode uses it.
    #[serde(default)]
    pub strict: bool,
}

impl From<&ResponseFormat> for LoggedFormat {
    fn from(format: &ResponseFormat) -> Self {
        LoggedFormat {
            name: format.name.clone(),
            schema: format.schema.clone(),
            strict: format.strict,
        }
    }
}

impl From<LoggedFormat> for ResponseFormat {
    fn from(format: LoggedFormat) -> Self {
        ResponseFormat {
            name: format.name,
            schema: format.schema,
            strict: format.strict,
        }
    }
}

/// How a request of a given id ended, as its log tells ([`Session::handled`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandledRequest {
    /// The model's final answer, the last message before the request's close.
    Answered(String),
    /// It failed and kept what it did (its tools may have run): it is not run again.
    Failed,
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
    /// The archive entries themselves, so that a resumed session can still `expand`; may be empty
    /// when the archive lives elsewhere.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "as_json_value"
    )]
    pub archive_entries: Vec<ArchiveEntry>,
    /// The file ledger at compaction time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "as_json_value"
    )]
    pub ledger: Option<FileLedger>,
    /// The compaction report.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "as_json_value"
    )]
    pub report: Option<CompactionReport>,
}

/// A tool call left open when a turn paused for approval ([`SessionRecord::Paused`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedCall {
    /// The tool call's id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments the model wrote (JSON).
    pub arguments: String,
    /// Whether it waits for a person's answer (otherwise it was allowed and waits only for
    /// the asked calls of its message).
    pub ask: bool,
    /// The id a person was asked under (`ask` calls; `Approvals::mint`), so a resumed turn asks
    /// again under the id that was shown. Logs written before it was recorded have none: the
    /// call is then asked under a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalId>,
    /// Whether it began to run ([`SessionRecord::CallsStarted`]); set on replay, not written.
    #[serde(default, skip_serializing)]
    pub started: bool,
    /// What it answered, when it finished before the log ended ([`SessionRecord::CallResult`]);
    /// set on replay, not written.
    #[serde(default, skip_serializing)]
    pub result: Option<String>,
}

/// A conversation restored from its log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    /// The conversation as of the last commit.
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
    pub ledger: Option<FileLedger>,
    /// Ids of every archived original.
    pub archived: Vec<MessageId>,
    /// Every archive entry recorded in the log, oldest first.
    pub archive_entries: Vec<ArchiveEntry>,
    /// The report of the latest compaction.
    pub last_report: Option<CompactionReport>,
    /// The calls of a turn that paused for approval and never finished, in call order (empty
    /// when the last turn finished).
    pub paused: Vec<PausedCall>,
    /// Whether a request was in flight when the log ended (opened and not closed: the process
    /// stopped mid-request); the agent resumes it from its last committed step.
    pub in_flight: bool,
    /// The answer format of the request in flight (a typed ask's schema), which its resumed
    /// model calls carry.
    pub in_flight_format: Option<ResponseFormat>,
    /// Whether the request in flight was already resumed once after a fatal failure of its
    /// agent ([`SessionRecord::RequestResuming`]): a supervisor restart closes it as rolled
    /// back instead of resuming it again.
    pub in_flight_resumed: bool,
    /// The id of the request in flight, when its caller gave one.
    pub in_flight_request: Option<String>,
    /// The requests of an id that the log closed, answered or failed (one rolled back left
    /// nothing behind and is not here: it may run again), by id.
    pub handled: std::collections::BTreeMap<String, HandledRequest>,
    /// Compactions applied.
    pub compactions: usize,
    /// Committed records applied.
    pub records: usize,
    /// What was skipped (a torn last line, an unfinished commit).
    pub warnings: Vec<String>,
}

/// Serializes `value` through a [`serde_json::Value`], whose objects sort their keys: the agent
/// state keeps the exact bytes logs were written with when it was stored as JSON values (format
/// 1; `tests/fixtures/session_format_1.jsonl` holds such a log).
fn as_json_value<T: Serialize, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(serializer)
}
