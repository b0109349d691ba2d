//! A request body that fails when its client stops sending: no handler waits on a stalled
//! upload for longer than [`super::ServeLimits::body_idle`].

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

/// Why a body ended early.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `inner`, failing once `idle` passes with no new frame (counted from the request's arrival,
/// then from each frame).
pub(super) struct IdleBody {
    inner: Incoming,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl IdleBody {
    pub(super) fn new(inner: Incoming, idle: Duration) -> Self {
        IdleBody {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }
}

impl Body for IdleBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = Instant::now() + this.idle;
                this.deadline.as_mut().reset(next);
                Poll::Ready(frame.map(|f| f.map_err(BoxError::from)))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                    "the request body sent nothing for {} s",
                    this.idle.as_secs()
                )
                .into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
