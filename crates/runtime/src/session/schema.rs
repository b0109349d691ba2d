//! [`SessionSchema`]: the types of the agent state a session log stores but the runtime does not
//! know — the file ledger, archive entries, the compaction report — named by the layer that does.

use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::{Serialize, Serializer};
use serde_json::Value;

/// The types of what a log records beside the conversation.
///
/// The runtime replays messages, compactions and clears; what an agent keeps with them is typed by
/// the agent's crate (`troupe_agents::AgentSession`), so a record of the wrong shape is refused at
/// its line when the log is read, and one that cannot be serialized is an error when it is written.
/// [`Untyped`] reads and writes any log as JSON values.
pub trait SessionSchema: Debug + Clone + PartialEq {
    /// The file ledger (`ledger` records, a compaction's `ledger`).
    type Ledger: Serialize + DeserializeOwned + Debug + Clone + PartialEq;
    /// One archived original (a compaction's `archive_entries`).
    type ArchiveEntry: Serialize + DeserializeOwned + Debug + Clone + PartialEq;
    /// The compaction report (a compaction's `report`).
    type Report: Serialize + DeserializeOwned + Debug + Clone + PartialEq;
}

/// Every record's agent state as a JSON value: for readers that do not interpret it (the CLI's
/// `/clear`, tools that only look at the conversation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Untyped;

impl SessionSchema for Untyped {
    type Ledger = Value;
    type ArchiveEntry = Value;
    type Report = Value;
}

/// Serializes `value` through a [`Value`], whose objects sort their keys: the agent state keeps
/// the exact bytes logs were written with when it was stored as JSON values (format 1).
pub(super) fn as_json_value<T: Serialize, S: Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(serializer)
}
