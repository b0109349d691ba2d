//! Integration tests of troupe-session (one test binary; modules under `suite/`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod suite;
