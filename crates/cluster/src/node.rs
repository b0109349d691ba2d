//! [`ClusterNode`]: a team's presence in a cluster — a listening ractor_cluster node server, the
//! gateway other nodes reach its agents through, and the route its directory takes to theirs.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::{IncomingEncryptionMode, NodeServer, NodeServerMessage, NodeSessionMessage};
use tokio::task::JoinHandle;
use troupe_runtime::{Directory, Team};

use crate::cookie::check_cookie;
use crate::door::{self, Door};
use crate::error::ClusterError;
use crate::gateway::{Gateway, GatewayArgs};
use crate::heartbeat::{self, HEARTBEAT_DEADLINE};
use crate::peers::{Closure, PeerEvents, Peers};
use crate::route::{ACK_TIMEOUT, ClusterRoute, GATEWAYS, SCOPE, gateway_of};
use crate::tls::TlsConfig;
use crate::wire::{self, GatewayMsg, WireReply, WireRequest};

/// How long [`ClusterNode::connect`] waits for a peer to accept and authenticate us.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How a node is started.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's name, unique in the cluster (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// Where to listen for other nodes. Port 0 picks a free port (see
    /// [`ClusterNode::listen_addr`]). Defaults to loopback: a node is reachable from other
    /// machines only when told so.
    pub listen: SocketAddr,
    /// The shared secret: a node whose cookie differs is refused before any message is handled.
    /// At least [`MIN_COOKIE_CHARS`](crate::MIN_COOKIE_CHARS) random characters (e.g. `openssl
    /// rand -hex 32`): a weaker one is refused at start.
    pub cookie: String,
    /// Encrypt connections with mutual TLS (both accepting and connecting).
    pub tls: Option<TlsConfig>,
    /// How long an ask whose agent's node went away waits for the agent's new home (a node
    /// that took its log over: another one, or this one) before it fails with `NodeDown` — within the ask's own
    /// timeout, and retried there under the same request id, so the agent answers it from its
    /// log instead of running it twice. Zero (the default): `NodeDown` at once.
    pub failover: Duration,
    /// How long a peer has to answer a heartbeat before it is taken for down and disconnected
    /// (its asks then fail over, or fail with `NodeDown`). Default [`HEARTBEAT_DEADLINE`]; a
    /// shorter one notices a frozen peer sooner, and takes a slow one for dead sooner too.
    pub heartbeat_deadline: Duration,
}

impl NodeConfig {
    /// A node called `name` listening on a free loopback port, authenticated by `cookie`.
    pub fn new(name: impl Into<String>, cookie: impl Into<String>) -> Self {
        NodeConfig {
            name: name.into(),
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            cookie: cookie.into(),
            tls: None,
            failover: Duration::ZERO,
            heartbeat_deadline: HEARTBEAT_DEADLINE,
        }
    }

    /// What is wrong with listening as configured, if anything: a non-loopback address without
    /// TLS lets whoever can reach it read the traffic and capture handshakes to guess the
    /// cookie offline. [`ClusterNode::start`] logs it as a warning.
    pub fn exposure_warning(&self) -> Option<String> {
        (!self.listen.ip().is_loopback() && self.tls.is_none()).then(|| {
            format!(
                "cluster node `{}` listens on {} without TLS: anyone who can reach it can read \
                 its traffic and capture handshakes to guess the cookie offline; use TLS or a \
                 loopback address",
                self.name, self.listen
            )
        })
    }
}

/// A task that ends with its owner.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A team's node in a cluster. Agents the node publishes can be asked by name from every
/// connected node, and the team's own `ask`s reach agents on them: a name is looked up locally
/// first, then across the cluster.
pub struct ClusterNode {
    name: String,
    listen: SocketAddr,
    server: ActorRef<NodeServerMessage>,
    server_task: JoinHandle<()>,
    gateway: ActorRef<GatewayMsg>,
    gateway_task: JoinHandle<()>,
    peers: Peers,
    directory: Directory,
    tls: Option<TlsConfig>,
    /// The accept loop (see [`crate::door`]) and the heartbeat (see [`crate::heartbeat`]).
    door: AbortOnDrop,
    heartbeat: AbortOnDrop,
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("name", &self.name)
            .field("listen", &self.listen)
            .field("peers", &self.peers.names())
            .finish()
    }
}

impl ClusterNode {
    /// Start a node for `team` and publish the agents it has now (publish later ones with
    /// [`ClusterNode::publish`]).
    ///
    /// # Errors
    /// A bad name, a weak cookie ([`ClusterError::WeakCookie`]), a listen address in use
    /// ([`ClusterError::AddrInUse`]) or that cannot be bound, TLS files that cannot be read, or
    /// a team that is already in a cluster.
    pub async fn start(team: &Team, config: NodeConfig) -> Result<ClusterNode, ClusterError> {
        check_name(&config.name)?;
        check_cookie(&config.cookie)?;
        if config.heartbeat_deadline.is_zero() {
            return Err(ClusterError::Config(
                "a heartbeat deadline of zero takes every peer for down: give it a duration".into(),
            ));
        }
        let acceptor = config.tls.as_ref().map(TlsConfig::acceptor).transpose()?;
        let listener = door::bind(config.listen).await?;
        let listen = listener.local_addr().map_err(|e| ClusterError::Listen {
            addr: config.listen,
            reason: e.to_string(),
        })?;
        // The node's own listener (`listener`) takes the connections; ractor_cluster's cannot
        // be left out, so it goes on an ephemeral loopback port — still behind the same TLS —
        // and is closed right after the start (see `close_builtin_listener`).
        // ractor_cluster names the node `name@host`, and settles two sessions of one such name
        // by closing one of them, whichever it is. A tag drawn per start makes two processes
        // of one node name two names there, so troupe can turn the newcomer away and keep the
        // node already connected (see `PeerEvents::node_session_authenticated`).
        let host = format!(
            "{}~{:016x}",
            listen.ip(),
            troupe_protocol::TraceContext::new_root().span_id
        );
        let server = NodeServer::new(
            0,
            config.cookie.clone(),
            config.name.clone(),
            host,
            acceptor.clone().map(IncomingEncryptionMode::Tls),
            Some(NodeConnectionMode::Isolated),
        )
        .with_listen_addr(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let (server, server_task) = Actor::spawn(None, server, ())
            .await
            .map_err(|e| ClusterError::Config(format!("node server: {e}")))?;
        close_builtin_listener(&server);
        let peers = Peers::default();
        server
            .cast(NodeServerMessage::SubscribeToEvents {
                id: "troupe".into(),
                subscription: Box::new(PeerEvents(peers.clone())),
            })
            .map_err(|e| ClusterError::Config(format!("node server: {e}")))?;
        let directory = team.directory().clone();
        let (gateway, gateway_task) = Actor::spawn(
            None,
            Gateway,
            GatewayArgs {
                node: config.name.clone(),
                directory: directory.clone(),
            },
        )
        .await
        .map_err(|e| ClusterError::Config(format!("gateway: {e}")))?;
        let route = ClusterRoute {
            node: config.name.clone(),
            peers: peers.clone(),
            failover: config.failover,
        };
        if !directory.set_remote(Arc::new(route)) {
            server.stop(None);
            gateway.stop(None);
            return Err(ClusterError::Config(
                "this team is already in a cluster".into(),
            ));
        }
        ractor::pg::join_scoped(SCOPE.into(), GATEWAYS.into(), vec![gateway.get_cell()]);
        ractor::pg::join_scoped(
            SCOPE.into(),
            gateway_of(&config.name),
            vec![gateway.get_cell()],
        );
        let door = Door {
            listener,
            server: server.clone(),
            tls: acceptor,
            peers: peers.clone(),
        };
        let door = AbortOnDrop(tokio::spawn(door.run()));
        let heartbeat = AbortOnDrop(tokio::spawn(heartbeat::run(
            config.name.clone(),
            peers.clone(),
            config.heartbeat_deadline,
        )));
        if let Some(warning) = config.exposure_warning() {
            tracing::warn!("{warning}");
        }
        let node = ClusterNode {
            name: config.name,
            listen,
            server,
            server_task,
            gateway,
            gateway_task,
            peers,
            directory,
            tls: config.tls,
            door,
            heartbeat,
        };
        for name in node.directory.names() {
            node.publish(&name)?;
        }
        tracing::info!(node = %node.name, listen = %node.listen, "cluster node started");
        Ok(node)
    }

    /// Make the local agent `name` reachable from the other nodes.
    ///
    /// # Errors
    /// [`ClusterError::NoSuchAgent`] when the team has no agent of that name.
    pub fn publish(&self, name: &str) -> Result<(), ClusterError> {
        if !self.directory.names().iter().any(|n| n == name) {
            return Err(ClusterError::NoSuchAgent(name.to_string()));
        }
        ractor::pg::join_scoped(SCOPE.into(), name.into(), vec![self.gateway.get_cell()]);
        Ok(())
    }

    /// Connect to the node listening at `addr` and wait until it has authenticated us and the
    /// two nodes know each other's agents. Returns the peer's name.
    ///
    /// # Errors
    /// [`ClusterError::Refused`] when the peer closes the connection during the handshake (a
    /// wrong cookie, TLS it does not accept, or a node of its name already connected here),
    /// [`ClusterError::Protocol`] when it speaks another troupe wire protocol,
    /// [`ClusterError::Connect`] when nothing listens there.
    pub async fn connect(&self, addr: SocketAddr) -> Result<String, ClusterError> {
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        let closed_before = self.peers.closed_count();
        self.open(addr, deadline).await?;
        // The session reports the address it connected to in one of these spellings.
        let addrs = [addr.to_string(), format!("{}", addr.ip())];
        let (node_id, peer) = loop {
            let changed = self.peers.changed();
            if let Some(found) = self.peers.ready_at(&addrs) {
                break found;
            }
            if let Some(closure) = self.peers.closed_since(closed_before, &addrs) {
                return Err(ClusterError::Refused {
                    addr,
                    reason: self.refusal(closure),
                });
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                // Leave nothing half-open behind.
                for addr in &addrs {
                    self.peers
                        .disconnect_unauthenticated(addr, "handshake timed out");
                }
                return Err(ClusterError::Refused {
                    addr,
                    reason: format!("no handshake within {CONNECT_TIMEOUT:?}"),
                });
            }
        };
        self.hello(node_id, &peer).await?;
        tracing::info!(node = %self.name, peer = %peer, %addr, "connected to cluster node");
        Ok(peer)
    }

    /// Why the session with a peer closed during `connect`'s handshake, in words.
    fn refusal(&self, closure: Closure) -> String {
        if let Some(reason) = closure.reason {
            return reason;
        }
        match closure.name {
            // ractor_cluster closes the newer of two sessions with one node name.
            Some(name) if self.peers.names().contains(&name) => {
                format!("a node named `{name}` is already connected")
            }
            _ => match self.tls {
                None => "it closed the connection during the handshake (wrong cookie?)".into(),
                Some(_) => "it closed the connection during the handshake (wrong cookie, or \
                            a certificate it does not accept?)"
                    .into(),
            },
        }
    }

    /// Open the TCP (or TLS) connection, retrying briefly while the peer starts listening; a
    /// peer that accepts and then says nothing is given until `deadline`.
    async fn open(
        &self,
        addr: SocketAddr,
        deadline: tokio::time::Instant,
    ) -> Result<(), ClusterError> {
        let mut last = String::new();
        for _ in 0..20 {
            let opening = async {
                match &self.tls {
                    None => ractor_cluster::client_connect(&self.server, addr)
                        .await
                        .map_err(|e| format!("{e:?}")),
                    Some(tls) => {
                        let (connector, domain) = tls.connector().map_err(|e| e.to_string())?;
                        ractor_cluster::client_connect_enc(&self.server, addr, connector, domain)
                            .await
                            .map_err(|e| format!("{e:?}"))
                    }
                }
            };
            match tokio::time::timeout_at(deadline, opening).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => last = e,
                Err(_) => {
                    return Err(ClusterError::Refused {
                        addr,
                        reason: format!("no handshake within {CONNECT_TIMEOUT:?}"),
                    });
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(ClusterError::Connect { addr, reason: last })
    }

    /// Check the peer's gateway speaks our wire protocol; disconnect it when it does not.
    async fn hello(&self, node_id: u64, peer: &str) -> Result<(), ClusterError> {
        let Some(gateway) = crate::heartbeat::find_gateway(node_id, peer) else {
            self.peers.disconnect(node_id, "no troupe gateway");
            return Err(ClusterError::Protocol {
                node: peer.to_string(),
                reason: "it runs no troupe gateway".into(),
            });
        };
        self.peers.set_gateway(node_id, gateway.clone());
        let gateway: ActorRef<GatewayMsg> = gateway.into();
        let frame = wire::encode(&WireRequest::Hello {
            node: self.name.clone(),
        });
        let reply = gateway
            .call(|reply| GatewayMsg::Call { frame, reply }, Some(ACK_TIMEOUT))
            .await;
        let refusal = match reply {
            Ok(ractor::rpc::CallResult::Success(bytes)) => {
                match wire::decode::<WireReply>(&bytes) {
                    Ok(WireReply::Hello { .. }) => return Ok(()),
                    Ok(WireReply::Refused(reason)) => reason,
                    Ok(other) => format!("unexpected reply {other:?}"),
                    Err(error) => error.to_string(),
                }
            }
            other => format!("no answer to hello: {other:?}"),
        };
        self.peers.disconnect(node_id, &refusal);
        Err(ClusterError::Protocol {
            node: peer.to_string(),
            reason: refusal,
        })
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address other nodes connect to (with the port picked, when 0 was asked for).
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
    }

    /// The names of the nodes connected to this one, sorted.
    pub fn peers(&self) -> Vec<String> {
        self.peers.names()
    }

    /// Leave the cluster: stop taking requests from other nodes and close every connection
    /// (their in-flight asks here fail with `NodeDown` there). The team keeps running.
    pub async fn shutdown(self) {
        // No new connections, no more pings.
        drop(self.door);
        drop(self.heartbeat);
        ractor::pg::leave_scoped(SCOPE.into(), GATEWAYS.into(), vec![self.gateway.get_cell()]);
        ractor::pg::leave_scoped(
            SCOPE.into(),
            gateway_of(&self.name),
            vec![self.gateway.get_cell()],
        );
        self.gateway.stop(Some("node shutdown".into()));
        self.server.stop(Some("node shutdown".into()));
        let _ = self.gateway_task.await;
        let _ = self.server_task.await;
    }
}

/// Node names follow agent names' rules (they appear in errors and traces).
fn check_name(name: &str) -> Result<(), ClusterError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || "-_.".contains(c))
    {
        return Err(ClusterError::Config(format!(
            "invalid node name `{name}`: use letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(())
}

/// ractor_cluster's `NodeServer` always starts a listener of its own, with none of the front
/// door's limits (see [`crate::door`]). It is the server's one child that is not a session
/// right after the start: unlink it first (or the server would start a new one), then stop it.
/// Should that ever fail, it stays on an ephemeral loopback port behind the same cookie and TLS.
fn close_builtin_listener(server: &ActorRef<NodeServerMessage>) {
    for child in server.get_children() {
        if child.is_message_type_of::<NodeSessionMessage>() == Some(false) {
            child.unlink(server.get_cell());
            child.kill();
        }
    }
}
