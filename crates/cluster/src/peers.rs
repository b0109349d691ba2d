//! Which nodes this node is connected to, by ractor's node id and by name, kept current by
//! ractor_cluster's session events.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ractor_cluster::NodeEventSubscription;
use ractor_cluster::node::NodeServerSessionInformation;
use tokio::sync::Notify;
use troupe_runtime::sync;

/// A session's state as this node last heard it.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// ractor_cluster's actor for the connection (stopping it disconnects the peer).
    pub(crate) actor: ractor::ActorRef<ractor_cluster::NodeSessionMessage>,
    /// The peer's node name (without the `@host` part), once it authenticated.
    pub(crate) name: Option<String>,
    /// The peer's socket address as seen from here.
    pub(crate) addr: String,
    pub(crate) ready: bool,
}

/// Sessions by ractor node id, shared between the node and its event subscription.
#[derive(Debug, Clone, Default)]
pub(crate) struct Peers {
    sessions: Arc<Mutex<HashMap<u64, Session>>>,
    /// Sessions that closed, numbered, by address (for `connect` to tell a refused connection).
    closed: Arc<Mutex<Closed>>,
    changed: Arc<Notify>,
}

impl Peers {
    /// The name of the node with ractor id `node_id`, if it is connected and authenticated.
    pub(crate) fn name_of(&self, node_id: u64) -> Option<String> {
        sync::lock(&self.sessions)
            .get(&node_id)
            .and_then(|s| s.name.clone())
    }

    /// Names of the connected, ready nodes, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = sync::lock(&self.sessions)
            .values()
            .filter(|s| s.ready)
            .filter_map(|s| s.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The ready session with the peer at `addr`, if any: its node id and name.
    pub(crate) fn ready_at(&self, addrs: &[String]) -> Option<(u64, String)> {
        sync::lock(&self.sessions).iter().find_map(|(id, s)| {
            (s.ready && addrs.contains(&s.addr)).then(|| (*id, s.name.clone().unwrap_or_default()))
        })
    }

    /// Close the connection to node `node_id` (a peer this node cannot work with).
    pub(crate) fn disconnect(&self, node_id: u64, reason: &str) {
        if let Some(session) = sync::lock(&self.sessions).get(&node_id) {
            session.actor.stop(Some(reason.to_string()));
        }
    }

    /// Whether a session with the peer at one of `addrs` closed since `seen` closures.
    pub(crate) fn closed_since(&self, seen: usize, addrs: &[String]) -> bool {
        let closed = sync::lock(&self.closed);
        let new = closed.total.saturating_sub(seen).min(closed.recent.len());
        closed
            .recent
            .iter()
            .rev()
            .take(new)
            .any(|a| addrs.contains(a))
    }

    /// How many sessions have closed so far (a mark for [`Peers::closed_since`]).
    pub(crate) fn closed_count(&self) -> usize {
        sync::lock(&self.closed).total
    }

    /// Resolves when any session changes.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    fn update(&self, info: &NodeServerSessionInformation, ready: bool) {
        let name = info
            .peer_name
            .as_ref()
            .map(|n| n.name.split('@').next().unwrap_or_default().to_string());
        sync::lock(&self.sessions).insert(
            info.node_id,
            Session {
                actor: info.actor.clone(),
                name,
                addr: info.peer_addr.clone(),
                ready,
            },
        );
        self.changed.notify_waiters();
    }
}

/// The latest closed sessions' addresses, numbered from the first closure.
#[derive(Debug, Default)]
struct Closed {
    /// How many sessions closed in all.
    total: usize,
    /// The latest (at most 512) addresses, the last being closure number `total - 1`.
    recent: std::collections::VecDeque<String>,
}

/// The subscription ractor_cluster calls on session events.
pub(crate) struct PeerEvents(pub(crate) Peers);

impl NodeEventSubscription for PeerEvents {
    fn node_session_opened(&self, info: NodeServerSessionInformation) {
        self.0.update(&info, false);
    }

    fn node_session_disconnected(&self, info: NodeServerSessionInformation) {
        let peers = &self.0;
        let gone = sync::lock(&peers.sessions).remove(&info.node_id);
        if let Some(name) = gone.and_then(|s| s.name) {
            tracing::info!(node = %name, addr = %info.peer_addr, "cluster node disconnected");
        }
        let mut closed = sync::lock(&peers.closed);
        closed.total += 1;
        closed.recent.push_back(info.peer_addr.clone());
        // `connect` looks at closures since it began; old ones are of no use to anyone.
        if closed.recent.len() > 512 {
            closed.recent.pop_front();
        }
        drop(closed);
        peers.changed.notify_waiters();
    }

    fn node_session_authenticated(&self, info: NodeServerSessionInformation) {
        self.0.update(&info, false);
    }

    fn node_session_ready(&self, info: NodeServerSessionInformation) {
        self.0.update(&info, true);
    }
}
