//! Helpers over the events a team publishes.

use tokio::sync::broadcast;
use troupe_protocol::{Event, EventRecord};

/// Every event heard so far.
pub(crate) fn drain(events: &mut broadcast::Receiver<EventRecord>) -> Vec<Event> {
    let mut heard = Vec::new();
    while let Ok(record) = events.try_recv() {
        heard.push(record.event);
    }
    heard
}
