//! The feed: the view's state and its viewers, each with a bounded queue.
//!
//! The team's events are folded in by one task and fanned out with `try_send`: a viewer whose
//! queue is full is not waited for. It is marked lagged, gets nothing more until it has caught
//! up, and is then told so and sent a fresh snapshot. A closed viewer is dropped at the next
//! event. Nothing here ever waits on a browser, so a slow or closed one cannot slow the team.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::Stream;
use tokio::sync::mpsc::{self, error::TrySendError};
use troupe_protocol::sync::lock;

use crate::json::to_safe_json;
use crate::view::{Patch, View};

/// What a viewer is sent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Out {
    /// The whole view (JSON).
    Snapshot(String),
    /// One change (JSON).
    Patch(Arc<str>),
    /// The viewer fell behind and lost changes; a snapshot follows.
    Lagged,
}

#[derive(Debug)]
struct Viewer {
    queue: mpsc::Sender<Arc<str>>,
    lagged: Arc<AtomicBool>,
}

#[derive(Debug)]
struct Inner {
    view: View,
    viewers: Vec<Viewer>,
}

/// The view's state and the viewers it is fanned out to.
#[derive(Debug)]
pub(crate) struct Feed {
    inner: Mutex<Inner>,
    queue: usize,
}

impl Feed {
    pub(crate) fn new(view: View, queue: usize) -> Arc<Self> {
        Arc::new(Feed {
            inner: Mutex::new(Inner {
                view,
                viewers: Vec::new(),
            }),
            queue: queue.max(1),
        })
    }

    /// Change the view and send the change to every viewer that keeps up. The change and its
    /// sending happen under one lock, so every viewer sees changes in the order they were made
    /// and a snapshot never falls between a change and its patch.
    pub(crate) fn update(&self, change: impl for<'a> FnOnce(&'a mut View) -> Patch<'a>) {
        let mut inner = lock(&self.inner);
        let Inner { view, viewers } = &mut *inner;
        let patch = change(view);
        let text: Arc<str> = to_safe_json(&patch).into();
        viewers.retain(|viewer| {
            if viewer.lagged.load(Ordering::Acquire) {
                return !viewer.queue.is_closed();
            }
            match viewer.queue.try_send(text.clone()) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    viewer.lagged.store(true, Ordering::Release);
                    true
                }
                Err(TrySendError::Closed(_)) => false,
            }
        });
    }

    /// The view missed `n` of the team's events: every viewer re-syncs.
    pub(crate) fn missed(&self, n: u64) {
        let mut inner = lock(&self.inner);
        inner.view.missed(n);
        for viewer in &inner.viewers {
            viewer.lagged.store(true, Ordering::Release);
            // A viewer that had caught up waits on its empty queue: this wakes it (it drops
            // whatever it receives while lagged). A full queue wakes it anyway.
            let _ = viewer.queue.try_send(Arc::from(""));
        }
    }

    /// Read the view.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&View) -> R) -> R {
        f(&lock(&self.inner).view)
    }

    /// The whole view as JSON.
    pub(crate) fn snapshot(&self) -> String {
        to_safe_json(&lock(&self.inner).view.snapshot())
    }

    /// Viewers connected now (closed ones count until the next event notices).
    pub(crate) fn viewers(&self) -> usize {
        lock(&self.inner).viewers.len()
    }

    /// A new viewer: a snapshot, then every change after it, in order.
    pub(crate) fn subscribe(self: &Arc<Self>) -> impl Stream<Item = Out> + Send + use<> {
        let (tx, rx) = mpsc::channel(self.queue);
        let lagged = Arc::new(AtomicBool::new(false));
        let snapshot = {
            let mut inner = lock(&self.inner);
            inner.viewers.push(Viewer {
                queue: tx,
                lagged: lagged.clone(),
            });
            to_safe_json(&inner.view.snapshot())
        };
        let state = ViewerState {
            feed: self.clone(),
            queue: rx,
            lagged,
            pending: VecDeque::from([Out::Snapshot(snapshot)]),
        };
        futures::stream::unfold(state, |mut state| async move {
            let out = state.next().await?;
            Some((out, state))
        })
    }

    /// A lagged viewer catches up: what waits in its queue is stale, the snapshot replaces it.
    /// Under the lock, so no change falls between the snapshot and the next patch.
    fn resync(&self, lagged: &AtomicBool, queue: &mut mpsc::Receiver<Arc<str>>) -> String {
        let inner = lock(&self.inner);
        while queue.try_recv().is_ok() {}
        lagged.store(false, Ordering::Release);
        to_safe_json(&inner.view.snapshot())
    }
}

/// One viewer's end of the feed.
struct ViewerState {
    feed: Arc<Feed>,
    queue: mpsc::Receiver<Arc<str>>,
    lagged: Arc<AtomicBool>,
    pending: VecDeque<Out>,
}

impl ViewerState {
    async fn next(&mut self) -> Option<Out> {
        loop {
            if let Some(out) = self.pending.pop_front() {
                return Some(out);
            }
            if self.lagged.load(Ordering::Acquire) {
                let snapshot = self.feed.resync(&self.lagged, &mut self.queue);
                self.pending.push_back(Out::Lagged);
                self.pending.push_back(Out::Snapshot(snapshot));
                continue;
            }
            // A lagged viewer's queue is full (or woken by `missed`), so this returns at once;
            // what it returns then is stale, and the flag is seen on the next turn.
            let patch = self.queue.recv().await?;
            if !self.lagged.load(Ordering::Acquire) {
                return Some(Out::Patch(patch));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;
    use troupe_protocol::{Event, EventRecord};

    use super::*;
    use crate::agent_view::Marks;

    fn record(seq: u64) -> EventRecord {
        EventRecord {
            seq,
            at_ms: seq,
            trace_id: None,
            event: Event::RequestStarted {
                agent: format!("a{}", seq % 3),
            },
        }
    }

    fn version(json: &str) -> u64 {
        serde_json::from_str::<serde_json::Value>(json).unwrap()["version"]
            .as_u64()
            .unwrap()
    }

    #[tokio::test]
    async fn a_viewer_that_falls_behind_is_skipped_then_told_and_re_synced() {
        let feed = Feed::new(View::new(Marks::default(), 100, false), 4);
        let viewer = feed.subscribe();
        futures::pin_mut!(viewer);
        // A hundred changes while the viewer reads nothing: none of them waits for it.
        for seq in 1..=100 {
            feed.update(|view| view.apply(record(seq)));
        }
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(viewer.next().await.unwrap());
        }
        // Its first snapshot, then the news and the present: what waited in its queue is stale
        // and never sent.
        assert!(
            matches!(&seen[0], Out::Snapshot(s) if version(s) == 0),
            "{:?}",
            seen[0]
        );
        assert_eq!(seen[1], Out::Lagged);
        assert!(
            matches!(&seen[2], Out::Snapshot(s) if version(s) == 100),
            "{:?}",
            seen[2]
        );
        // Caught up: the next change comes as a patch again.
        feed.update(|view| view.apply(record(101)));
        let next = viewer.next().await.unwrap();
        assert!(
            matches!(&next, Out::Patch(p) if version(p) == 101),
            "{next:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_viewer_that_had_caught_up_re_syncs_when_the_view_missed_events() {
        let feed = Feed::new(View::new(Marks::default(), 100, false), 4);
        let viewer = feed.subscribe();
        futures::pin_mut!(viewer);
        assert!(matches!(viewer.next().await, Some(Out::Snapshot(_))));
        // Caught up: it waits on an empty queue when the view learns it missed events.
        let mut next = viewer.next();
        assert!(futures::poll!(&mut next).is_pending());
        feed.missed(7);
        let next = tokio::time::timeout(std::time::Duration::from_secs(60), next).await;
        assert_eq!(next.unwrap(), Some(Out::Lagged));
        let snapshot = viewer.next().await.unwrap();
        assert!(
            matches!(&snapshot, Out::Snapshot(s) if s.contains("\"missed\":7")),
            "{snapshot:?}"
        );
    }

    #[tokio::test]
    async fn a_closed_viewer_is_dropped_at_the_next_change() {
        let feed = Feed::new(View::new(Marks::default(), 100, false), 4);
        let viewer = feed.subscribe();
        assert_eq!(feed.viewers(), 1);
        drop(viewer);
        feed.update(|view| view.apply(record(1)));
        assert_eq!(feed.viewers(), 0);
    }
}
