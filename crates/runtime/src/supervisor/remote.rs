//! Agents on other nodes: the one seam between a team's [`Directory`](crate::Directory) and a
//! cluster (the `troupe-cluster` crate implements it).
//!
//! The directory looks a name up locally first; only a name no local agent has (live or
//! stopped) goes to [`RemoteAgents`]. The runtime knows nothing about networks: a remote ask
//! is whatever the implementation makes of it, reported with the same [`AskError`]s a local
//! ask gives, plus [`AskError::NodeDown`] and [`AskError::Remote`].

use std::time::Duration;

use async_trait::async_trait;

use crate::supervisor::behavior::AgentRequest;
use crate::supervisor::directory::AskError;
use troupe_protocol::TraceContext;

/// Agents that live on other nodes, reachable by name.
#[async_trait]
pub trait RemoteAgents: Send + Sync + 'static {
    /// The node that runs an agent called `name`, if another node does.
    fn locate(&self, name: &str) -> Option<String>;

    /// The names of the agents on other nodes, with their node, sorted by name.
    fn names(&self) -> Vec<(String, String)>;

    /// How long an ask whose agent's node went away ([`AskError::NodeDown`]) waits for the
    /// agent's new home, within the ask's timeout (the directory then asks it there under the
    /// same request id). Zero, the default: the ask fails with `NodeDown` at once.
    fn failover(&self) -> Duration {
        Duration::ZERO
    }

    /// Ask the remote agent `name` and wait up to `timeout` for its answer: one delivery, to
    /// the node that hosts it now.
    async fn ask(
        &self,
        name: &str,
        request: AgentRequest,
        timeout: Duration,
    ) -> Result<String, AskError>;

    /// Give the remote agent `name` a [`WireJob`](crate::WireJob) of kind `kind` (its JSON in
    /// `payload`) and wait up to `timeout` for the reply's JSON.
    async fn ask_job(
        &self,
        name: &str,
        kind: &str,
        payload: String,
        trace: TraceContext,
        timeout: Duration,
    ) -> Result<String, AskError>;

    /// Deliver a request to the remote agent `name` without waiting for its answer; `Ok`
    /// means its node acknowledged the request.
    async fn send(&self, name: &str, request: AgentRequest) -> Result<(), AskError>;
}
