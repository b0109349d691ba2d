mod across_nodes;
mod door;
mod handshake;
pub(crate) mod support;
