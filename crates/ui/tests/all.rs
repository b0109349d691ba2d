//! troupe-ui's integration tests: the server (token, origin, feed, escaping, approvals, a
//! finished run) and the page in a real browser.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod suite;
