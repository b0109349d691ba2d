//! UiError: why the view could not be served.

use std::path::PathBuf;

/// Why the view could not be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UiError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The system gave no randomness for the token.
    #[error("no randomness for the view's token: {0}")]
    Token(String),
    /// A session log could not be read.
    #[error("cannot read the session log {path}: {reason}")]
    Session {
        /// The log.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A trace file could not be read.
    #[error("cannot read the trace file {path}: {source}")]
    Trace {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
}
