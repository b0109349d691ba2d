//! Which nodes this node is connected to, by ractor's node id and by name, kept current by
//! ractor_cluster's session events.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use ractor_cluster::NodeEventSubscription;
use ractor_cluster::node::NodeServerSessionInformation;
use tokio::sync::Notify;
use troupe_protocol::sync;

/// How far a session has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// Connected, not authenticated yet: nothing of the peer is trusted.
    Opened,
    /// The cookie challenge succeeded.
    Authenticated,
    /// Authenticated and the process groups are exchanged: usable.
    Ready,
}

/// A session's state as this node last heard it.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// ractor_cluster's actor for the connection (stopping it disconnects the peer).
    pub(crate) actor: ractor::ActorRef<ractor_cluster::NodeSessionMessage>,
    /// The peer's node name (without the `@host` part), once it told it.
    pub(crate) name: Option<String>,
    /// The peer's full ractor_cluster name (`name@host~tag`, one per process).
    full_name: Option<String>,
    /// The peer's socket address as seen from here.
    pub(crate) addr: String,
    pub(crate) stage: Stage,
    /// Why this node closed the session itself, if it did (reported by `connect`).
    closing: Option<String>,
    /// The peer's gateway, once found (see `heartbeat::ping`).
    gateway: Option<ractor::ActorCell>,
}

/// A session that closed: where it was, who it said it was, and why this node closed it.
#[derive(Debug, Clone)]
pub(crate) struct Closure {
    pub(crate) addr: String,
    pub(crate) name: Option<String>,
    pub(crate) reason: Option<String>,
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
            .filter(|s| s.stage >= Stage::Authenticated)
            .and_then(|s| s.name.clone())
    }

    /// Names of the connected, ready nodes, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = sync::lock(&self.sessions)
            .values()
            .filter(|s| s.stage == Stage::Ready)
            .filter_map(|s| s.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The node ids and names of the ready sessions (the ones the heartbeat watches).
    pub(crate) fn ready(&self) -> Vec<(u64, String)> {
        sync::lock(&self.sessions)
            .iter()
            .filter(|(_, s)| s.stage == Stage::Ready)
            .filter_map(|(id, s)| Some((*id, s.name.clone()?)))
            .collect()
    }

    /// The ready session with the peer at `addr`, if any: its node id and name.
    pub(crate) fn ready_at(&self, addrs: &[String]) -> Option<(u64, String)> {
        sync::lock(&self.sessions).iter().find_map(|(id, s)| {
            (s.stage == Stage::Ready && addrs.contains(&s.addr))
                .then(|| (*id, s.name.clone().unwrap_or_default()))
        })
    }

    /// How far the session with the peer at `addr` has come, if there is one.
    pub(crate) fn stage_at(&self, addr: &str) -> Option<Stage> {
        sync::lock(&self.sessions)
            .values()
            .find(|s| s.addr == addr)
            .map(|s| s.stage)
    }

    /// Remember the gateway of node `node_id`.
    pub(crate) fn set_gateway(&self, node_id: u64, gateway: ractor::ActorCell) {
        if let Some(session) = sync::lock(&self.sessions).get_mut(&node_id) {
            session.gateway = Some(gateway);
        }
    }

    /// The gateway of node `node_id`, if found before.
    pub(crate) fn gateway(&self, node_id: u64) -> Option<ractor::ActorCell> {
        sync::lock(&self.sessions)
            .get(&node_id)
            .and_then(|s| s.gateway.clone())
    }

    /// Close the connection to node `node_id` (a peer this node cannot work with).
    pub(crate) fn disconnect(&self, node_id: u64, reason: &str) {
        if let Some(session) = sync::lock(&self.sessions).get_mut(&node_id) {
            session.closing = Some(reason.to_string());
            session.actor.stop(Some(reason.to_string()));
        }
    }

    /// Close the not yet authenticated session with the peer at `addr`, if there is one.
    /// Returns whether there was.
    pub(crate) fn disconnect_unauthenticated(&self, addr: &str, reason: &str) -> bool {
        let mut sessions = sync::lock(&self.sessions);
        let Some(session) = sessions
            .values_mut()
            .find(|s| s.addr == addr && s.stage == Stage::Opened)
        else {
            return false;
        };
        session.closing = Some(reason.to_string());
        session.actor.stop(Some(reason.to_string()));
        true
    }

    /// The latest closure of a session with the peer at one of `addrs` since `seen` closures.
    pub(crate) fn closed_since(&self, seen: usize, addrs: &[String]) -> Option<Closure> {
        let closed = sync::lock(&self.closed);
        let new = closed.total.saturating_sub(seen).min(closed.recent.len());
        closed
            .recent
            .iter()
            .rev()
            .take(new)
            .find(|c| addrs.contains(&c.addr))
            .cloned()
    }

    /// How many sessions have closed so far (a mark for [`Peers::closed_since`]).
    pub(crate) fn closed_count(&self) -> usize {
        sync::lock(&self.closed).total
    }

    /// Resolves when any session changes.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    fn update(&self, info: &NodeServerSessionInformation, stage: Stage) {
        let name = short_name(info);
        let full_name = info.peer_name.as_ref().map(|n| n.name.clone());
        sync::lock(&self.sessions)
            .entry(info.node_id)
            .and_modify(|s| {
                s.name.clone_from(&name);
                s.full_name.clone_from(&full_name);
                // A session this node is closing never becomes usable again.
                if s.closing.is_none() {
                    s.stage = stage;
                }
            })
            .or_insert_with(|| Session {
                actor: info.actor.clone(),
                name: name.clone(),
                full_name: full_name.clone(),
                addr: info.peer_addr.clone(),
                stage,
                closing: None,
                gateway: None,
            });
        self.changed.notify_waiters();
    }

    /// Whether another process than the one of `info`'s session is connected under its name.
    /// Two sessions with one process (both nodes connecting at once) are ractor_cluster's to
    /// settle: they share the full name.
    fn taken_by_another(&self, info: &NodeServerSessionInformation) -> Option<String> {
        let name = short_name(info)?;
        let full_name = info.peer_name.as_ref().map(|n| n.name.as_str());
        sync::lock(&self.sessions)
            .iter()
            .any(|(id, s)| {
                *id != info.node_id
                    && s.stage >= Stage::Authenticated
                    && s.name.as_deref() == Some(name.as_str())
                    && s.full_name.as_deref() != full_name
            })
            .then_some(name)
    }
}

/// The peer's node name as troupe knows it: ractor_cluster's name without `@host`.
fn short_name(info: &NodeServerSessionInformation) -> Option<String> {
    info.peer_name
        .as_ref()
        .map(|n| n.name.split('@').next().unwrap_or_default().to_string())
}

/// The latest closed sessions, numbered from the first closure.
#[derive(Debug, Default)]
struct Closed {
    /// How many sessions closed in all.
    total: usize,
    /// The latest (at most 512) closures, the last being closure number `total - 1`.
    recent: VecDeque<Closure>,
}

/// The subscription ractor_cluster calls on session events.
pub(crate) struct PeerEvents(pub(crate) Peers);

impl NodeEventSubscription for PeerEvents {
    fn node_session_opened(&self, info: NodeServerSessionInformation) {
        self.0.update(&info, Stage::Opened);
    }

    fn node_session_disconnected(&self, info: NodeServerSessionInformation) {
        let peers = &self.0;
        let gone = sync::lock(&peers.sessions).remove(&info.node_id);
        let name = gone
            .as_ref()
            .and_then(|s| s.name.clone())
            .or_else(|| short_name(&info));
        if let Some(session) = &gone
            && session.stage >= Stage::Authenticated
            && let Some(name) = &name
        {
            tracing::info!(node = %name, addr = %info.peer_addr, "cluster node disconnected");
        }
        let mut closed = sync::lock(&peers.closed);
        closed.total += 1;
        closed.recent.push_back(Closure {
            addr: info.peer_addr.clone(),
            name,
            reason: gone.and_then(|s| s.closing),
        });
        // `connect` looks at closures since it began; old ones are of no use to anyone.
        if closed.recent.len() > 512 {
            closed.recent.pop_front();
        }
        drop(closed);
        peers.changed.notify_waiters();
    }

    fn node_session_authenticated(&self, info: NodeServerSessionInformation) {
        let peers = &self.0;
        // Names are how agents and errors point at nodes: a second process of a node name
        // already connected would make both ambiguous. The newcomer is turned away; the
        // connected one stays.
        let reason = peers
            .taken_by_another(&info)
            .map(|n| format!("a node named `{n}` is already connected"));
        peers.update(&info, Stage::Authenticated);
        if let Some(reason) = reason {
            tracing::warn!(addr = %info.peer_addr, "{reason}: refusing the second one");
            peers.disconnect(info.node_id, &reason);
        }
    }

    fn node_session_ready(&self, info: NodeServerSessionInformation) {
        self.0.update(&info, Stage::Ready);
    }
}
