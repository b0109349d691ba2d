//! What a person's answer to a paused tool call is about: the call's [`ApprovalId`] and the
//! [`ApprovalDecision`] (the desk that waits for it is the runtime's).

use serde::{Deserialize, Serialize};

/// Names one tool call waiting for approval: `AGENT:CALL_ID`. The same call gets the same id
/// after a restart, so an answer given for it then still names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApprovalId(pub String);

impl ApprovalId {
    /// The id of `agent`'s tool call `call_id`.
    pub fn of_call(agent: &str, call_id: &str) -> Self {
        ApprovalId(format!("{agent}:{call_id}"))
    }
}

impl std::fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A person's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalDecision {
    /// Run the call; with `arguments`, run it with these (a JSON object) instead of the model's.
    Approve {
        /// Edited arguments, when the person changed them.
        arguments: Option<String>,
    },
    /// Do not run the call; the model sees `reason` as the call's result.
    Deny {
        /// Why, in the person's words.
        reason: String,
    },
}
