//! The one integration-test binary of troupe-mcp (one binary links once, which keeps the shared
//! target directory small and the test run fast).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
