//! troupe-a2a's integration tests: the server, a remote agent as a teammate, hostile peers, and
//! the official A2A SDK in both roles (one binary links once).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod suite;
