//! Typed errors: a refused operation ([`Refusal`]) and a failed compaction ([`CompactionError`]).

use troupe_protocol::{MessageId, Role};

use crate::policy::PolicyError;
use crate::protection::ProtectionReason;
use crate::summary::SummarizerError;
use crate::validate::InvariantViolation;

/// Why a [`CompactionSession`](crate::session::CompactionSession) operation refused to act.
/// Nothing changed.
///
/// The messages are written for the compression agent's model: they say what is wrong and,
/// where there is one, what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The id names no message of the working conversation.
    #[error("there is no message {0} in the conversation (get the metadata for current ids)")]
    UnknownMessage(MessageId),
    /// The message is protected.
    #[error("{id} is protected ({reason}) and cannot be compressed")]
    Protected {
        /// The id the call named.
        id: MessageId,
        /// Why it is protected.
        reason: ProtectionReason,
    },
    /// `compress_tool_result` on something that is not a tool result.
    #[error(
        "{id} is a message from the {role}, not a tool result; compress_tool_result only accepts tool results"
    )]
    NotToolResult {
        /// The id the call named.
        id: MessageId,
        /// Its role.
        role: Role,
    },
    /// The tool result was already compressed this way (or further).
    #[error("{id} is already compressed")]
    AlreadyCompressed {
        /// The id the call named.
        id: MessageId,
    },
    /// Truncation asked for an output at or below the truncation limit.
    #[error("{id} has {tokens} tokens, not above the truncation limit of {limit}; mask it instead")]
    BelowTruncationLimit {
        /// The id the call named.
        id: MessageId,
        /// Its tokens.
        tokens: usize,
        /// The policy's limit.
        limit: usize,
    },
    /// The replacement would not be smaller.
    #[error("compressing {id} would not save tokens ({before} → {after})")]
    NoGain {
        /// The message (or the segment's first message).
        id: MessageId,
        /// Tokens now.
        before: usize,
        /// Tokens of the replacement.
        after: usize,
    },
    /// A stub or a cut output would hide more names than it has room to list (half the
    /// output): the output is mostly names, and it keeps them where it is.
    #[error(
        "compressing {id} would hide {names} names (error lines, tests, …) its replacement has no room to list ({room} tokens, half the output); leave it, or summarize it with its segment"
    )]
    NamesDoNotFit {
        /// The tool result.
        id: MessageId,
        /// How many hidden names the stub's room leaves out.
        names: usize,
        /// The room the stub's list of names had.
        room: usize,
    },
    /// `remove_display_only` on a message the model sees.
    #[error("{id} is not a display-only message")]
    NotDisplayOnly {
        /// The id the call named.
        id: MessageId,
    },
    /// A segment whose start comes after its end.
    #[error("segment start {start} comes after its end {end}")]
    ReversedRange {
        /// The given start.
        start: MessageId,
        /// The given end.
        end: MessageId,
    },
    /// A segment that contains a protected message.
    #[error(
        "segment {start}..{end} includes {id}, which is protected ({reason}); end the segment before it"
    )]
    RangeIncludesProtected {
        /// Segment start.
        start: MessageId,
        /// Segment end.
        end: MessageId,
        /// The protected message.
        id: MessageId,
        /// Why it is protected.
        reason: ProtectionReason,
    },
    /// A segment that would separate tool calls from their results.
    #[error(
        "segment {start}..{end} splits assistant message {assistant} from its tool result {result}; move the boundary so both are inside or both outside"
    )]
    RangeCutsToolPair {
        /// Segment start.
        start: MessageId,
        /// Segment end.
        end: MessageId,
        /// The assistant message with the calls.
        assistant: MessageId,
        /// A result on the other side of the boundary.
        result: MessageId,
    },
    /// A segment with nothing a summary could replace.
    #[error("segment {start}..{end} has nothing to summarize")]
    NothingToSummarize {
        /// Segment start.
        start: MessageId,
        /// Segment end.
        end: MessageId,
    },
    /// The summarizer failed; the conversation is unchanged.
    #[error("summarizing {start}..{end} failed: {cause}")]
    Summarizer {
        /// Segment start.
        start: MessageId,
        /// Segment end.
        end: MessageId,
        /// What went wrong.
        cause: SummarizerError,
    },
    /// The conversation was under target when the session began; compaction must not change it.
    #[error("no compaction needed: {current} tokens is within the target of {target}")]
    NoCompactionNeeded {
        /// Tokens when the session began.
        current: usize,
        /// The target.
        target: usize,
    },
}

/// Why a compaction produced no result at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompactionError {
    /// The policy is unusable.
    #[error("invalid compaction policy: {0}")]
    Policy(PolicyError),
    /// The input conversation already breaks an invariant (compaction would be blamed for it).
    #[error("the conversation to compact is already invalid: {0}")]
    InvalidInput(InvariantViolation),
    /// The result broke an invariant; it was discarded rather than returned.
    #[error("compaction produced an invalid conversation and discarded it: {0}")]
    Invariant(InvariantViolation),
    /// A newer compaction of the same agent arrived while this one was still queued at the
    /// compression agent and took its place; this one never ran.
    #[error("superseded by a newer compaction of agent `{agent}` before it ran")]
    Superseded {
        /// Whose compaction it was.
        agent: String,
    },
}

// By hand rather than `#[from]`: the message above already says the policy error, and `#[from]`
// would also return it as `source()`, so an error-chain printer would say it twice.
impl From<PolicyError> for CompactionError {
    fn from(error: PolicyError) -> Self {
        CompactionError::Policy(error)
    }
}
