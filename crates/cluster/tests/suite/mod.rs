mod across_nodes;
mod handshake;
pub(crate) mod support;
