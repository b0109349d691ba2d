//! [`ReplayDivergence`]: where a replayed run stopped doing what the recorded one did.

use std::fmt;
use std::path::PathBuf;

/// A replayed run asked its model something the recording does not hold: the asking agent,
/// its model call, and how it differs.
///
/// Its text is what the failed model call reports (as [`ModelError::InvalidRequest`]), e.g.
/// ``agent `coder`, model call 4: the request differs from the recorded one: messages[3] (tool)
/// content differs: …``.
///
/// [`ModelError::InvalidRequest`]: troupe_protocol::ModelError::InvalidRequest
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayDivergence {
    /// The agent that asked (the request's [`ChatRequest::agent`]); `None` for a request that
    /// named none.
    ///
    /// [`ChatRequest::agent`]: troupe_protocol::ChatRequest::agent
    pub agent: Option<String>,
    /// The agent whose cassette it is, when another agent asked on it (the compression agent
    /// summarising with the agent's own model).
    pub owner: Option<String>,
    /// The cassette file.
    pub cassette: PathBuf,
    /// The asker's 1-based model call on this cassette.
    pub call: usize,
    /// How the run differs from the recording.
    pub kind: DivergenceKind,
}

/// How a replayed run differs from its recording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DivergenceKind {
    /// The request is not the recorded one (the program changed a prompt, a tool, the order of
    /// its calls): the first difference, in words.
    #[error("the request differs from the recorded one: {0}")]
    RequestDiffers(String),
    /// The run asks more calls than were recorded.
    #[error("the cassette holds no such call (the recorded run made {recorded})")]
    NotRecorded {
        /// How many calls this asker made when recorded.
        recorded: usize,
    },
    /// The run ended without asking calls that were recorded ([`Cassettes::verify`]).
    ///
    /// [`Cassettes::verify`]: super::Cassettes::verify
    #[error("the run never asked it ({left} recorded call(s) left unasked)")]
    NeverAsked {
        /// Recorded calls left, this one included.
        left: usize,
    },
}

impl std::error::Error for ReplayDivergence {}

impl fmt::Display for ReplayDivergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(agent) = &self.agent {
            write!(f, "agent `{agent}`, ")?;
        }
        write!(f, "model call {}", self.call)?;
        if let Some(owner) = self
            .owner
            .as_ref()
            .filter(|o| Some(*o) != self.agent.as_ref())
        {
            write!(f, " on `{owner}`'s cassette")?;
        }
        write!(f, ": {}", self.kind)
    }
}
