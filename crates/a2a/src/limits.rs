//! How much a peer may send and how long it may take: the bounds every A2A exchange is held to,
//! on the same principle as the MCP client's (a cap on every body and event, a clock on every
//! wait), so that a hostile or broken peer costs bounded memory and time.

use std::time::Duration;

/// The bounds of the client's exchanges with a remote agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// The agent card's bytes (a real card is a few KiB).
    pub card_bytes: usize,
    /// One JSON-RPC answer's bytes.
    pub body_bytes: usize,
    /// One streamed event's bytes (one SSE line, one event's data).
    pub event_bytes: usize,
    /// The text an answer may collect in all (artifacts and status messages).
    pub answer_bytes: usize,
    /// The wait for a connection and the answer's headers.
    pub connect: Duration,
    /// The longest silence between two streamed events (or before a plain answer's body ends).
    pub idle: Duration,
    /// The whole request, however lively the peer.
    pub deadline: Duration,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            card_bytes: 256 * 1024,
            body_bytes: 16 * 1024 * 1024,
            event_bytes: 4 * 1024 * 1024,
            answer_bytes: 4 * 1024 * 1024,
            connect: Duration::from_secs(10),
            idle: Duration::from_secs(120),
            deadline: Duration::from_secs(600),
        }
    }
}

/// The largest request body the server reads by default: a message's text for a model is far
/// smaller; anything larger is refused before it is read whole.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;
