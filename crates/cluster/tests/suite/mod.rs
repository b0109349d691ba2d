mod across_nodes;
mod door;
mod failover;
mod handshake;
pub(crate) mod support;
