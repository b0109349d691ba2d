//! troupe-models' integration suites (one binary; each file in `suite/` is one subject).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod suite;
