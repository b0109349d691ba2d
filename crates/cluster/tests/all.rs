//! troupe-cluster's integration tests: two real node processes on loopback (the second is this
//! test binary re-run as `suite::support::child::cluster_child_node`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
