//! The event bus: every [`Event`] published once, to broadcast subscribers and to the stream of
//! the request it belongs to.
//!
//! The CLI's progress display, trace files and tests all read the same stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::broadcast;
use troupe_protocol::{Event, EventRecord, EventSink, TraceId};

use crate::ask_stream::{RequestWatch, WatchedRequest, Watches};

/// A broadcast bus of [`EventRecord`]s; cheap to clone, every clone publishes to the same stream.
///
/// Slow subscribers lose the oldest events (they see `Lagged`); publishers never block.
///
/// A request asked with `Team::ask_stream` is also *watched*: every event published under its
/// trace id goes, in order and without loss, to that request's stream as well (see
/// [`RequestWatch`]).
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<EventRecord>,
    seq: Arc<AtomicU64>,
    watches: Arc<Watches>,
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new(1024)
    }
}

/// Code that only publishes (a tool call, through its `ToolContext`) holds the bus as a sink.
impl EventSink for EventBus {
    fn publish(&self, trace_id: Option<TraceId>, event: Event) {
        // The inherent method: one road for every publisher.
        EventBus::publish(self, trace_id, event);
    }
}

impl EventBus {
    /// A bus that buffers up to `capacity` events per subscriber.
    pub fn new(capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity.max(1));
        EventBus {
            sender,
            seq: Arc::new(AtomicU64::new(1)),
            watches: Arc::default(),
        }
    }

    /// Publish an event; the sequence number is assigned atomically with the send order.
    pub fn publish(&self, trace_id: Option<TraceId>, event: Event) {
        let watch = trace_id.and_then(|id| self.watches.get(id));
        self.send(trace_id, event, watch.as_ref());
    }

    /// Send `event` to the request's stream (when watched) and to the bus's subscribers.
    fn send(&self, trace_id: Option<TraceId>, event: Event, watch: Option<&RequestWatch>) {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        if let Some(watch) = watch {
            watch.forward(&event);
        }
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        // No subscribers is fine: events are observational.
        let _ = self.sender.send(EventRecord {
            seq,
            at_ms,
            trace_id,
            event,
        });
    }

    /// Publish text a model generated for `agent` ([`Event::ModelDelta`]). When the request is
    /// watched, this waits until its stream has room (a slow reader slows the model down
    /// instead of growing memory), or until nobody reads it any more.
    pub async fn publish_delta(&self, trace_id: TraceId, agent: &str, text: String) {
        // One lookup for both the room and the delivery: this runs for every generated piece.
        let watch = self.watches.get(trace_id);
        if let Some(watch) = &watch {
            watch.wait_for_room().await;
        }
        self.send(
            Some(trace_id),
            Event::ModelDelta {
                agent: agent.to_string(),
                text,
            },
            watch.as_ref(),
        );
    }

    /// The watch on the request with this trace id, when one is streamed to a caller: agents
    /// working for it keep it to notice that the caller stopped listening
    /// ([`RequestWatch::abandoned`]).
    pub fn watch_of(&self, trace_id: TraceId) -> Option<RequestWatch> {
        self.watches.get(trace_id)
    }

    /// Start watching the request with this trace id (one watch per trace).
    pub(crate) fn watch(&self, trace_id: TraceId) -> WatchedRequest {
        self.watches.register(trace_id)
    }

    /// A new subscriber that sees every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<EventRecord> {
        self.sender.subscribe()
    }

    /// Number of live subscribers.
    pub fn subscriber_count(&self) -> usize {
        self.sender.receiver_count()
    }
}
