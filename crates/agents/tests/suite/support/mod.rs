//! What the suites share: test models, teams, fake servers and event helpers. A suite takes its
//! helpers from here, never from another suite.

#[cfg(feature = "local")]
pub(crate) mod local;
