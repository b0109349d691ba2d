//! Supervision: agent actors, their supervisor, the team directory and the [`Team`] handle.

pub(crate) mod actor;
pub(crate) mod behavior;
pub(crate) mod directory;
pub(crate) mod failover;
pub(crate) mod handle;
pub(crate) mod job;
pub(crate) mod overflow;
pub(crate) mod remote;
#[allow(clippy::module_inception)]
pub(crate) mod supervisor;
pub(crate) mod team;
pub(crate) mod wire_job;
