//! The integration tests of troupe-compaction, in one binary (see `suite/`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
