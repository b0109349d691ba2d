//! What the provider suites share: fake servers on the providers' real wire formats and the
//! embedded engine on the real default weights. troupe-agents' suites read the same files.

pub(crate) mod anthropic_server;
#[cfg(feature = "local")]
pub(crate) mod local;
pub(crate) mod model_fault_server;
