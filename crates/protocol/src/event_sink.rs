//! Where an [`Event`] is published, as seen by code that only publishes: a tool call reports its
//! start and end through it without knowing the runtime's bus (which implements it).

use std::fmt::Debug;

use crate::{Event, TraceId};

/// Takes published events. The runtime's `EventBus` is the one that carries them to
/// subscribers; [`NoEvents`] drops them, for code that runs outside a team.
pub trait EventSink: Send + Sync + Debug {
    /// Publish `event`, of the request `trace_id` when it belongs to one. Never blocks: events
    /// are observational.
    fn publish(&self, trace_id: Option<TraceId>, event: Event);
}

/// An [`EventSink`] that drops every event: nobody is listening.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn publish(&self, _trace_id: Option<TraceId>, _event: Event) {}
}
