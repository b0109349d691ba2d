//! Heartbeats: a peer that stops answering is disconnected within seconds.
//!
//! A peer that dies closes its TCP connection and is seen at once; a frozen one (stopped,
//! swapped out, partitioned) keeps the connection open and its askers waited out their whole
//! ask timeout. ractor_cluster pings its sessions but only logs slow answers. So every
//! [`HEARTBEAT_INTERVAL`] this node asks each ready peer's gateway for its `Hello` (a frame every
//! troupe node answers, so no protocol change), and a peer that has not answered within the
//! node's heartbeat deadline ([`HEARTBEAT_DEADLINE`] unless its config says otherwise,
//! `NodeConfig::heartbeat_deadline`) is disconnected: the usual node-down path then fails the asks waiting
//! on it with `AskError::NodeDown`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorCell, ActorRef};
use troupe_protocol::sync;

use crate::peers::Peers;
use crate::route::{GATEWAYS, SCOPE, gateway_of};
use crate::wire::{self, GatewayMsg, WireRequest};

/// How often each peer is pinged (more often when the node's heartbeat deadline is under two of
/// these, so a peer always gets two pings per deadline).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// How long a peer has to answer a ping before it is taken for down, unless the node's config
/// says otherwise.
pub const HEARTBEAT_DEADLINE: Duration = Duration::from_secs(5);

/// How often to ping under `deadline`: every [`HEARTBEAT_INTERVAL`], or twice per deadline when
/// that is shorter, so a peer gets at least two chances before it is taken for down.
fn interval_for(deadline: Duration) -> Duration {
    HEARTBEAT_INTERVAL
        .min(deadline / 2)
        .max(Duration::from_millis(1))
}

/// Ping every ready peer until the task is aborted (the node shuts down).
pub(crate) async fn run(node: String, peers: Peers, deadline: Duration) {
    let in_flight: Arc<Mutex<HashSet<u64>>> = Arc::default();
    let mut tick = tokio::time::interval(interval_for(deadline));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for (node_id, peer) in peers.ready() {
            // One ping per peer at a time: a slow answer is waited for, not piled onto.
            if !sync::lock(&in_flight).insert(node_id) {
                continue;
            }
            let (node, peers, in_flight) = (node.clone(), peers.clone(), in_flight.clone());
            tokio::spawn(async move {
                if ping(&node, node_id, &peer, &peers, deadline).await == Pong::Late {
                    let reason = format!("no heartbeat answer within {deadline:?}");
                    tracing::warn!(%peer, "{reason}: disconnecting");
                    peers.disconnect(node_id, &reason);
                }
                sync::lock(&in_flight).remove(&node_id);
            });
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Pong {
    /// Answered, or nothing to ask (no gateway: `connect` deals with such peers), or the
    /// connection already went (the disconnect is under way).
    Fine,
    /// No answer before the deadline.
    Late,
}

/// The gateway of peer `peer` (ractor node id `node_id`) in the process groups: the one of its
/// own group, else any with its node id (a node of an older build).
pub(crate) fn find_gateway(node_id: u64, peer: &str) -> Option<ActorCell> {
    let of_node = |group: String| {
        ractor::pg::get_scoped_members(&SCOPE.into(), &group)
            .into_iter()
            .find(|cell| cell.get_id().node() == node_id && !cell.get_id().is_local())
    };
    of_node(gateway_of(peer)).or_else(|| of_node(GATEWAYS.into()))
}

async fn ping(node: &str, node_id: u64, peer: &str, peers: &Peers, deadline: Duration) -> Pong {
    // The gateway found when the session began: process groups are keyed by actor id, and
    // ids repeat across the sessions of a process that hosts several nodes (tests), so a
    // later lookup can come back empty.
    let gateway = peers.gateway(node_id).or_else(|| {
        let found = find_gateway(node_id, peer)?;
        peers.set_gateway(node_id, found.clone());
        Some(found)
    });
    let Some(gateway) = gateway else {
        return Pong::Fine;
    };
    let gateway: ActorRef<GatewayMsg> = gateway.into();
    let frame = wire::encode(&WireRequest::Hello {
        node: node.to_string(),
    });
    match gateway
        .call(|reply| GatewayMsg::Call { frame, reply }, Some(deadline))
        .await
    {
        Ok(CallResult::Timeout) => Pong::Late,
        _ => Pong::Fine,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_gets_two_pings_per_deadline_and_at_most_one_a_second() {
        assert_eq!(interval_for(HEARTBEAT_DEADLINE), HEARTBEAT_INTERVAL);
        assert_eq!(
            interval_for(Duration::from_millis(600)),
            Duration::from_millis(300)
        );
        assert_eq!(
            interval_for(Duration::from_nanos(1)),
            Duration::from_millis(1)
        );
    }
}
