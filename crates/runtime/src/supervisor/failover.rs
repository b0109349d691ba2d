//! An ask whose agent's node went away, carried to the agent's new home.
//!
//! The cluster reports a lost node as [`AskError::NodeDown`]. With a failover wait set
//! ([`RemoteAgents::failover`]) the directory waits, within the ask's own timeout, for a node to
//! take the agent's log over and asks it there under the same request id: the agent answers a
//! request it already handled from its log and never runs it twice. The new home may be another
//! node or this one (a standby here started the agent), which is why the wait lives here, where
//! both are known, and not in the cluster's route, which sees only other nodes.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::supervisor::behavior::AgentRequest;
use crate::supervisor::directory::{AskError, Directory};
use crate::supervisor::remote::RemoteAgents;

/// How often an ask waiting for an agent's new home looks for it.
const HOME_POLL: Duration = Duration::from_millis(50);

/// Where an agent whose node went away lives now.
#[derive(Debug, PartialEq, Eq)]
enum Home {
    /// This team hosts it (a standby here took its log over).
    Here,
    /// Another node than the one that went away.
    Node(String),
}

impl Directory {
    /// Ask the remote agent `name`, following it to its new home when its node goes away and
    /// `remote` sets a failover wait; all within `timeout`.
    pub(super) async fn ask_remote(
        &self,
        remote: &Arc<dyn RemoteAgents>,
        name: &str,
        request: AgentRequest,
        timeout: Duration,
    ) -> Result<String, AskError> {
        let wait = remote.failover();
        if wait.is_zero() {
            return remote.ask(name, request, timeout).await;
        }
        let deadline = Instant::now() + timeout;
        // One id for every delivery of this request: that is what lets its new home answer it
        // from the log when the lost node had handled it.
        let request_id = request
            .request_id
            .clone()
            .unwrap_or_else(|| AgentRequest::fresh_id(request.from.as_deref().unwrap_or("ask")));
        let request = AgentRequest {
            request_id: Some(request_id),
            ..request
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let asked = remote.ask(name, request.clone(), left).await;
            let Err(AskError::NodeDown { node }) = &asked else {
                return asked;
            };
            let until = deadline.min(Instant::now() + wait);
            match self.new_home(remote.as_ref(), name, node, until).await {
                Some(Home::Here) => {
                    tracing::info!(agent = %name, from = %node, "the agent's node went away and this node took it over: asking it here under the same request id");
                    let left = deadline.saturating_duration_since(Instant::now());
                    return self.ask_here(name, request, left).await;
                }
                Some(Home::Node(home)) => {
                    tracing::info!(agent = %name, from = %node, to = %home, "the agent's node went away: asking its new home under the same request id");
                }
                None => return asked,
            }
        }
    }

    /// The home `name` has other than node `gone`, once it has one, until `until`.
    async fn new_home(
        &self,
        remote: &dyn RemoteAgents,
        name: &str,
        gone: &str,
        until: Instant,
    ) -> Option<Home> {
        loop {
            if self.is_live(name) {
                return Some(Home::Here);
            }
            if let Some(node) = remote.locate(name).filter(|node| node != gone) {
                return Some(Home::Node(node));
            }
            if Instant::now() + HOME_POLL > until {
                return None;
            }
            tokio::time::sleep(HOME_POLL).await;
        }
    }
}
