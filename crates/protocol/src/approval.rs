//! What a person's answer to a paused tool call is about: the call's [`ApprovalId`] and the
//! [`ApprovalDecision`] (the desk that waits for it is the runtime's).

use serde::{Deserialize, Serialize};

/// Names one opening of an approval request: `AGENT:CALL_ID#N`, N numbered by the team's
/// approval desk (`Approvals::mint` in troupe-runtime), which every surface takes the id from.
///
/// Why more than the agent and the model's call id: models reuse call ids (many number each
/// answer's calls from `call_0`), so by the time a late answer arrives that pair may name
/// another call, asked in a later turn; an answer must only ever decide the call it was given
/// for. A paused call keeps its id in the session log, so after a restart it is asked again
/// under the id it was shown with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApprovalId(pub String);

impl ApprovalId {
    /// The id of the `opening`-th request the desk opened, for `agent`'s tool call `call_id`.
    pub fn of_opening(agent: &str, call_id: &str, opening: u64) -> Self {
        ApprovalId(format!("{agent}:{call_id}#{opening}"))
    }

    /// The opening's number (the digits after the last `#`), when the id has one.
    pub fn opening(&self) -> Option<u64> {
        let (_, digits) = self.0.rsplit_once('#')?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// Whether this id names an opening for `agent`'s tool call `call_id` (any opening).
    pub fn is_of_call(&self, agent: &str, call_id: &str) -> bool {
        self.0
            .strip_prefix(agent)
            .and_then(|rest| rest.strip_prefix(':'))
            .and_then(|rest| rest.strip_prefix(call_id))
            .and_then(|rest| rest.strip_prefix('#'))
            .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_names_its_agent_call_and_opening() {
        let id = ApprovalId::of_opening("coder", "call_0", 7);
        assert_eq!(id.to_string(), "coder:call_0#7");
        assert_eq!(id.opening(), Some(7));
        assert!(id.is_of_call("coder", "call_0"));
        assert!(!id.is_of_call("coder", "call_"));
        assert!(!id.is_of_call("code", "call_0"));
        // A model's call id may hold a `#` itself: the opening is the last one's digits.
        let hashed = ApprovalId::of_opening("coder", "call#1", 2);
        assert_eq!(hashed.opening(), Some(2));
        assert!(hashed.is_of_call("coder", "call#1"));
        assert!(!hashed.is_of_call("coder", "call"));
        assert!(!hashed.is_of_call("coder", "call#1#2"));
        assert_eq!(ApprovalId("coder:call_0".to_string()).opening(), None);
        assert_eq!(ApprovalId("coder:call_0#".to_string()).opening(), None);
    }
}
