//! Why a cluster operation failed.

use std::net::SocketAddr;

/// Why a node could not start, connect or publish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The node's settings are unusable (name, cookie, a team already in a cluster).
    #[error("cluster node: {0}")]
    Config(String),
    /// The cookie is too weak to keep out a node that guesses it offline (see
    /// [`MIN_COOKIE_CHARS`](crate::MIN_COOKIE_CHARS)); the text says why and how to make one.
    #[error("cluster node: {0}")]
    WeakCookie(String),
    /// Another node or program listens on the address already.
    #[error("address {0} is already in use")]
    AddrInUse(SocketAddr),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's reason.
        reason: String,
    },
    /// Nothing accepted a connection at the address.
    #[error("cannot connect to a node at {addr}: {reason}")]
    Connect {
        /// The peer's address.
        addr: SocketAddr,
        /// The last connection error.
        reason: String,
    },
    /// The peer refused this node during the handshake.
    #[error("the node at {addr} refused this node: {reason}")]
    Refused {
        /// The peer's address.
        addr: SocketAddr,
        /// What the handshake showed.
        reason: String,
    },
    /// The peer speaks another troupe wire protocol (or is not a troupe node); it was
    /// disconnected.
    #[error("node `{node}` cannot be used: {reason}")]
    Protocol {
        /// The peer's name.
        node: String,
        /// The mismatch.
        reason: String,
    },
    /// TLS material could not be loaded.
    #[error("TLS: {0}")]
    Tls(String),
    /// [`ClusterNode::publish`](crate::ClusterNode::publish) named an agent the team does not have.
    #[error("the team has no agent named `{0}` to publish")]
    NoSuchAgent(String),
}
