//! What the suites share: test models, teams, fake servers and event helpers. A suite takes its
//! helpers from here, never from another suite.

pub(crate) mod anthropic_server;
pub(crate) mod compression;
pub(crate) mod events;
pub(crate) mod gated;
#[cfg(feature = "local")]
pub(crate) mod local;
pub(crate) mod model_fault_server;
pub(crate) mod rate_limit_server;
pub(crate) mod schedule;
pub(crate) mod tools;
pub(crate) mod work_ahead;
