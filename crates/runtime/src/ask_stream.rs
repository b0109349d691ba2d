//! `Team::ask_stream`: one request's events as they happen — model text, tool calls,
//! compactions, in every agent working for it — then its answer.
//!
//! The request is *watched* on the team's [`EventBus`](crate::EventBus): every event published
//! under its trace id is also sent to the request's stream, in publishing order and without loss
//! (the bus's broadcast subscribers may lag and lose events; a stream may not). Model deltas are
//! the only events an agent can produce without bound, so only they wait for room: at most
//! [`DELTA_ROOM`] unread deltas, then the agent's model stream is no longer pulled until the
//! reader catches up. Dropping the stream abandons the request: agents notice through
//! [`RequestWatch::abandoned`] and stop.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::{Semaphore, mpsc};

use crate::supervisor::directory::AskError;
use troupe_protocol::Event;
use troupe_protocol::TraceId;

/// How many model deltas may wait unread in one request's stream before the agents producing
/// them wait for the reader.
pub const DELTA_ROOM: usize = 256;

/// One item of a streamed request ([`Team::ask_stream`](crate::Team::ask_stream)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AskItem {
    /// Something that happened for the request — in the asked agent or in any agent it asked in
    /// turn, the compression agent included: [`Event::ModelDelta`] for generated text,
    /// tool calls, compactions, the start and finish of each agent's request.
    Event(Event),
    /// The asked agent's answer; the stream ends after it.
    Answer(String),
}

type Item = Result<AskItem, AskError>;

/// The agents' side of a watched request: what they publish under its trace id reaches the
/// caller's stream, and they can tell when the caller stopped listening.
#[derive(Debug, Clone)]
pub struct RequestWatch {
    tx: mpsc::UnboundedSender<Item>,
    room: Arc<Semaphore>,
}

impl RequestWatch {
    /// Resolves once the caller has dropped the stream: the request is abandoned, and agents
    /// working for it should stop (an `LlmAgent` cancels its request and rolls its conversation
    /// back to where the request found it).
    pub async fn abandoned(&self) {
        self.tx.closed().await;
    }

    /// Whether the caller has dropped the stream.
    pub fn is_abandoned(&self) -> bool {
        self.tx.is_closed()
    }

    pub(crate) fn forward(&self, event: &Event) {
        // A closed stream is an abandoned request: nothing to deliver.
        let _ = self.tx.send(Ok(AskItem::Event(event.clone())));
    }

    /// Take room for one delta, waiting while [`DELTA_ROOM`] are unread (an abandoned stream
    /// closes the room, so this never waits for a reader that is gone).
    pub(crate) async fn wait_for_room(&self) {
        if let Ok(permit) = self.room.acquire().await {
            permit.forget();
        }
    }

    fn finish(&self, item: Item) {
        let _ = self.tx.send(item);
    }
}

/// The watched requests of one bus, by trace id.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    /// How many are registered: publishing checks this before it takes the lock, so a bus with
    /// no streamed request pays one atomic load per event.
    count: AtomicUsize,
    by_trace: Mutex<HashMap<TraceId, RequestWatch>>,
}

impl Watches {
    pub(crate) fn get(&self, trace_id: TraceId) -> Option<RequestWatch> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        troupe_protocol::sync::lock(&self.by_trace)
            .get(&trace_id)
            .cloned()
    }

    pub(crate) fn register(self: &Arc<Self>, trace_id: TraceId) -> WatchedRequest {
        let (tx, rx) = mpsc::unbounded_channel();
        let watch = RequestWatch {
            tx,
            room: Arc::new(Semaphore::new(DELTA_ROOM)),
        };
        let previous = troupe_protocol::sync::lock(&self.by_trace).insert(trace_id, watch.clone());
        if previous.is_none() {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
        WatchedRequest {
            watches: self.clone(),
            trace_id,
            watch,
            rx,
        }
    }
}

/// A registered watch and the receiving end of its stream; unregistered when dropped.
#[derive(Debug)]
pub(crate) struct WatchedRequest {
    watches: Arc<Watches>,
    trace_id: TraceId,
    watch: RequestWatch,
    rx: mpsc::UnboundedReceiver<Item>,
}

impl WatchedRequest {
    /// Send the request's outcome, the stream's last item.
    pub(crate) fn finisher(&self) -> impl FnOnce(Item) + Send + 'static {
        let watch = self.watch.clone();
        move |item| watch.finish(item)
    }
}

impl Drop for WatchedRequest {
    fn drop(&mut self) {
        let mut by_trace = troupe_protocol::sync::lock(&self.watches.by_trace);
        let ours = by_trace
            .get(&self.trace_id)
            .is_some_and(|w| w.tx.same_channel(&self.watch.tx));
        if ours {
            by_trace.remove(&self.trace_id);
            self.watches.count.fetch_sub(1, Ordering::AcqRel);
        }
        // A producer waiting for room must not wait for a reader that is gone.
        self.watch.room.close();
    }
}

/// One request's events as they happen, then its answer ([`AskItem::Answer`]) or its error; the
/// stream ends after either. Dropping it abandons the request (see [`RequestWatch`]).
#[derive(Debug)]
pub struct AskStream {
    watched: WatchedRequest,
    done: bool,
}

impl AskStream {
    pub(crate) fn new(watched: WatchedRequest) -> Self {
        AskStream {
            watched,
            done: false,
        }
    }
}

impl Stream for AskStream {
    type Item = Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.watched.rx.poll_recv(cx) {
            Poll::Ready(Some(item)) => {
                match &item {
                    // A delta read is room for the next one.
                    Ok(AskItem::Event(Event::ModelDelta { .. })) => {
                        self.watched.watch.room.add_permits(1);
                    }
                    Ok(AskItem::Event(_)) => {}
                    Ok(AskItem::Answer(_)) | Err(_) => self.done = true,
                }
                Poll::Ready(Some(item))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
