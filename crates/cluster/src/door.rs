//! The front door: the node accepts other nodes' TCP connections itself and hands them to
//! ractor_cluster only within limits.
//!
//! ractor_cluster's own listener gives a connection all the time it wants to authenticate,
//! keeps any number of them, runs the TLS handshake inline (one silent client stalls every
//! later accept) and retries a failed accept at once, logging each failure: 300 idle
//! connections locked a real peer out and the out-of-descriptors error was logged 1.9 million
//! times in 10 s. A `NodeServer` cannot be started without that listener and offers no hook into
//! it, but it takes already-accepted streams through its public
//! `NodeServerMessage::ConnectionOpened`, the very message its listener sends. So the node binds
//! the listen address here, and ractor_cluster's listener is put on an ephemeral loopback port
//! and stopped at once (see `ClusterNode::start`).
//!
//! Here a connection gets [`HANDSHAKE_TIMEOUT`] to finish TLS and the cookie challenge, or it is
//! closed; at most [`MAX_PENDING`] connections (and [`MAX_PENDING_PER_IP`] from one address)
//! may be in that state, later ones are closed on arrival; a failed accept backs off.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::{NetworkStream, NodeServerMessage};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use troupe_protocol::sync;

use crate::error::ClusterError;
use crate::peers::{Peers, Stage};

/// How long a connecting node has to finish TLS and authenticate.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections that may be authenticating at once; more are closed on arrival.
pub const MAX_PENDING: usize = 64;

/// Connections from one IP address that may be authenticating at once, so that one source
/// cannot take every slot from the others.
pub const MAX_PENDING_PER_IP: usize = 8;

/// The first and the longest pause after a failed accept.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Bind the node's listen address, naming the usual failure plainly.
pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener, ClusterError> {
    TcpListener::bind(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            ClusterError::AddrInUse(addr)
        } else {
            ClusterError::Listen {
                addr,
                reason: e.to_string(),
            }
        }
    })
}

/// What the accept loop needs.
pub(crate) struct Door {
    pub(crate) listener: TcpListener,
    pub(crate) server: ActorRef<NodeServerMessage>,
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) peers: Peers,
}

impl Door {
    /// Accept connections until the task is aborted (the node shuts down).
    pub(crate) async fn run(self) {
        let Door {
            listener,
            server,
            tls,
            peers,
        } = self;
        let pending = Pending::default();
        let mut backoff = Backoff::default();
        let mut shed = Shed::default();
        loop {
            match listener.accept().await {
                Ok((stream, addr)) => {
                    backoff.reset();
                    let Some(slot) = pending.take(addr.ip()) else {
                        // Closing it at once costs the sender a reconnect and this node nothing.
                        if let Some(closed) = shed.count() {
                            tracing::warn!(%addr, closed, "too many node connections are authenticating at once; new ones are closed");
                        }
                        continue;
                    };
                    let admit = Admit {
                        server: server.clone(),
                        tls: tls.clone(),
                        peers: peers.clone(),
                    };
                    tokio::spawn(admit.run(stream, addr, slot));
                }
                Err(error) => {
                    // Out of descriptors, mostly: retrying at once only spins (and logs).
                    let (pause, log) = backoff.failed();
                    if log {
                        tracing::warn!(%error, retry_in = ?pause, failures = backoff.failures, "cannot accept node connections");
                    }
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

/// One accepted connection on its way in.
struct Admit {
    server: ActorRef<NodeServerMessage>,
    tls: Option<TlsAcceptor>,
    peers: Peers,
}

impl Admit {
    /// TLS (if any), hand-over to ractor_cluster, then watch: the session must authenticate
    /// before the deadline or it is closed. The slot is held until then.
    async fn run(self, stream: TcpStream, addr: SocketAddr, _slot: Slot) {
        let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
        let _ = stream.set_nodelay(true);
        let Ok(local_addr) = stream.local_addr() else {
            return;
        };
        let stream = match &self.tls {
            None => NetworkStream::Raw {
                peer_addr: addr,
                local_addr,
                stream,
            },
            Some(acceptor) => {
                match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => NetworkStream::TlsServer {
                        peer_addr: addr,
                        local_addr,
                        stream,
                    },
                    Ok(Err(error)) => {
                        tracing::debug!(%addr, %error, "TLS handshake with a connecting node failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%addr, "no TLS handshake within {HANDSHAKE_TIMEOUT:?}; closed");
                        return;
                    }
                }
            }
        };
        let closed_before = self.peers.closed_count();
        let opened = self.server.cast(NodeServerMessage::ConnectionOpened {
            stream: Box::new(stream),
            is_server: true,
        });
        if opened.is_err() {
            return;
        }
        self.watch(addr, closed_before, deadline).await;
    }

    /// Wait until the session at `addr` authenticates or closes; past the deadline, close it.
    async fn watch(&self, addr: SocketAddr, closed_before: usize, deadline: Instant) {
        let key = [addr.to_string()];
        // The session appears a moment after the hand-over; one that is not there yet at the
        // deadline is closed as soon as it appears (or given up on after a second period).
        let give_up = deadline + HANDSHAKE_TIMEOUT;
        let reason = format!("no authentication within {HANDSHAKE_TIMEOUT:?}");
        loop {
            let changed = self.peers.changed();
            if self.peers.closed_since(closed_before, &key).is_some() {
                return;
            }
            match self.peers.stage_at(&key[0]) {
                Some(Stage::Authenticated | Stage::Ready) => return,
                Some(Stage::Opened) if Instant::now() >= deadline => {
                    tracing::debug!(%addr, "{reason}; closed");
                    self.peers.disconnect_unauthenticated(&key[0], &reason);
                    return;
                }
                _ => {}
            }
            let until = if Instant::now() >= deadline {
                give_up
            } else {
                deadline
            };
            if tokio::time::timeout_at(until, changed).await.is_err() && until == give_up {
                return;
            }
        }
    }
}

/// Connections authenticating now, in all and per source address.
#[derive(Clone, Default)]
struct Pending(Arc<Mutex<PendingCounts>>);

#[derive(Default)]
struct PendingCounts {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

impl Pending {
    /// A slot for a connection from `ip`, if one is free.
    fn take(&self, ip: IpAddr) -> Option<Slot> {
        let mut counts = sync::lock(&self.0);
        let from_ip = counts.by_ip.get(&ip).copied().unwrap_or(0);
        if counts.total >= MAX_PENDING || from_ip >= MAX_PENDING_PER_IP {
            return None;
        }
        counts.total += 1;
        counts.by_ip.insert(ip, from_ip + 1);
        Some(Slot {
            pending: self.clone(),
            ip,
        })
    }
}

/// A taken slot, given back when dropped.
struct Slot {
    pending: Pending,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = sync::lock(&self.pending.0);
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.by_ip.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_ip.remove(&self.ip);
            }
        }
    }
}

/// Connections closed for want of a slot: a warning at most every [`SHED_WARN_EVERY`], with
/// how many were closed since the last one.
#[derive(Default)]
struct Shed {
    since_warned: u64,
    warned: Option<Instant>,
}

const SHED_WARN_EVERY: Duration = Duration::from_secs(10);

impl Shed {
    /// Count a closed connection; the count to report when a warning is due.
    fn count(&mut self) -> Option<u64> {
        self.since_warned += 1;
        let now = Instant::now();
        if self.warned.is_some_and(|at| now < at + SHED_WARN_EVERY) {
            return None;
        }
        self.warned = Some(now);
        Some(std::mem::take(&mut self.since_warned))
    }
}

/// Pauses after failed accepts: doubling from [`BACKOFF_MIN`] to [`BACKOFF_MAX`], and a log line
/// only at the 1st, 2nd, 4th, 8th… failure in a row (a dozen lines an hour, not millions).
#[derive(Debug, Default)]
struct Backoff {
    failures: u64,
}

impl Backoff {
    /// Count a failure: how long to pause, and whether to log it.
    fn failed(&mut self) -> (Duration, bool) {
        self.failures += 1;
        let doublings = u32::try_from(self.failures - 1).unwrap_or(u32::MAX).min(16);
        let pause = BACKOFF_MIN.saturating_mul(1 << doublings).min(BACKOFF_MAX);
        (pause, self.failures.is_power_of_two())
    }

    fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_accepts_back_off_to_a_second_and_log_rarely() {
        let mut backoff = Backoff::default();
        let mut pauses = Vec::new();
        let mut logged = 0;
        for _ in 0..10_000 {
            let (pause, log) = backoff.failed();
            pauses.push(pause);
            logged += usize::from(log);
        }
        assert_eq!(pauses[0], BACKOFF_MIN);
        assert_eq!(pauses[1], BACKOFF_MIN * 2);
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*pauses.last().unwrap(), BACKOFF_MAX);
        // 10 000 failures in a row (hours at one a second): 14 lines.
        assert_eq!(logged, 14);
        // The 10 000 pauses add up to hours: no spinning.
        assert!(pauses.iter().sum::<Duration>() > Duration::from_secs(9_000));
        backoff.reset();
        assert_eq!(backoff.failed(), (BACKOFF_MIN, true));
    }

    #[test]
    fn slots_are_capped_in_all_and_per_address_and_come_back() {
        let pending = Pending::default();
        let one: IpAddr = [10, 0, 0, 1].into();
        let held: Vec<Slot> = (0..MAX_PENDING_PER_IP)
            .map(|_| pending.take(one).unwrap())
            .collect();
        assert!(pending.take(one).is_none(), "one address took more slots");
        let others: Vec<Slot> = (0..MAX_PENDING - MAX_PENDING_PER_IP)
            .map(|i| {
                let ip: IpAddr = [10, 1, (i / 200) as u8, (i % 200) as u8].into();
                pending.take(ip).unwrap()
            })
            .collect();
        assert!(pending.take([10, 2, 0, 0].into()).is_none(), "over the cap");
        drop(held);
        assert!(pending.take(one).is_some());
        drop(others);
        assert_eq!(sync::lock(&pending.0).total, 0);
    }
}
