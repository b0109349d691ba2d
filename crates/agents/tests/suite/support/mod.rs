//! What the suites share: test models, teams, fake servers and event helpers. A suite takes its
//! helpers from here, never from another suite.

// The provider fakes and the local engine live with the provider suites in troupe-models; the
// agents' suites that need them (an Anthropic agent, cache pricing, local compaction) read the
// same files, each using a part of them (hence `dead_code` allowed on these three).
#[path = "../../../../models/tests/suite/support/anthropic_server.rs"]
#[allow(dead_code)]
pub(crate) mod anthropic_server;
pub(crate) mod compression;
pub(crate) mod events;
pub(crate) mod gated;
#[cfg(feature = "local")]
#[path = "../../../../models/tests/suite/support/local.rs"]
#[allow(dead_code)]
pub(crate) mod local;
#[path = "../../../../models/tests/suite/support/model_fault_server.rs"]
#[allow(dead_code)]
pub(crate) mod model_fault_server;
pub(crate) mod rate_limit_server;
pub(crate) mod schedule;
pub(crate) mod scoped_tracing;
pub(crate) mod tools;
pub(crate) mod work_ahead;
