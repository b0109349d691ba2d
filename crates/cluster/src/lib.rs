//! troupe-cluster: a team across processes and machines, on `ractor_cluster` nodes.
//!
//! Start a [`ClusterNode`] for a [`Team`](troupe_runtime::Team), [`connect`](ClusterNode::connect)
//! it to other nodes, and every `ask`, `send` and `ask_agent` tool call of the team reaches
//! agents on those nodes by name, as it reaches its own: a name is looked up locally first,
//! then across the cluster.
//!
//! What the cluster guarantees (and what it does not):
//! - **Authentication first**: nodes share a cookie; a node with another cookie is refused in
//!   the handshake, before any message of it is handled. The cookie must be strong (at least
//!   [`MIN_COOKIE_CHARS`] random characters, about [`MIN_COOKIE_BITS`] bits): a node shows a
//!   digest of it to whatever it connects to, so a weak one is refused at start. Connections
//!   can use mutual TLS ([`TlsConfig`]): both ends present a certificate from the given
//!   authority. A node listens on loopback unless told otherwise, and warns when it listens
//!   elsewhere without TLS.
//! - **Bounded handshakes**: a connecting node has [`HANDSHAKE_TIMEOUT`] to finish TLS and
//!   authenticate, at most [`MAX_PENDING`] (and [`MAX_PENDING_PER_IP`] per address) may be
//!   trying at once, and a failed accept (out of descriptors) backs off instead of spinning.
//! - **Silent peers are down peers**: each peer is pinged every [`HEARTBEAT_INTERVAL`]; one that
//!   has not answered within the node's heartbeat deadline ([`HEARTBEAT_DEADLINE`] by default,
//!   [`NodeConfig::heartbeat_deadline`]; frozen, partitioned) is disconnected as if it had died.
//! - **Names are unique across the cluster**: spawning an agent whose name a connected node
//!   already publishes fails with the node that holds it.
//! - **Every remote ask is acknowledged** (or fails within 5 s), **has a deadline** (the ask's
//!   timeout) and **an id**: a delivery seen twice is not handled twice.
//! - **A node that goes away fails its in-flight asks at once** with
//!   [`AskError::NodeDown`](troupe_runtime::AskError::NodeDown) — unless the asker's node waits
//!   for the agent's new home ([`NodeConfig::failover`]): then the ask is retried there — on
//!   another node or on the asker's own, whichever took the agent's log over — under the same
//!   request id, within its timeout, and the agent answers a request its log already closed
//!   from the log instead of running it again.
//! - **Versioned payloads**: requests travel as JSON frames that name the troupe wire protocol
//!   ([`WIRE_PROTOCOL`]); a node on another version is refused at connect with a clear error.
//! - **One trace across processes**: the request's `traceparent` travels with it; each node
//!   writes its own spans (JSONL, OTLP) and the receiving side's spans hang under the sending
//!   span.
//! - **Typed jobs** cross nodes only as [`WireJob`](troupe_runtime::WireJob)s, to a team that
//!   accepts their kind: an agent with no compression agent on its own node compacts through the
//!   one on another node, and on its own node (the planner) when that one cannot be reached.
//! - **Typed asks stay typed**: an ask's response format (`Team::ask_typed`'s schema) travels
//!   with it and constrains the agent's model on the other node as it would locally. A peer's
//!   format is checked first (a schema name OpenAI accepts, a JSON object of at most
//!   [`MAX_SCHEMA_BYTES`]); another is refused at acknowledgement. A node without the field
//!   ignores it: its model answers unconstrained, and the asker checks the answer either way.

mod cookie;
mod door;
mod error;
mod gateway;
mod heartbeat;
mod node;
mod peers;
mod route;
mod tls;
mod wire;

pub use cookie::{MIN_COOKIE_BITS, MIN_COOKIE_CHARS};
pub use door::{HANDSHAKE_TIMEOUT, MAX_PENDING, MAX_PENDING_PER_IP};
pub use error::ClusterError;
pub use heartbeat::{HEARTBEAT_DEADLINE, HEARTBEAT_INTERVAL};
pub use node::{ClusterNode, NodeConfig};
pub use tls::TlsConfig;
pub use wire::{FrameError, MAX_SCHEMA_BYTES, WIRE_PROTOCOL};
