//! A [`ChatStream`] passed through unchanged while an observer watches it: what a wrapper
//! (the `chat` span, the cassette recorder) needs to act on the answer a stream adds up to
//! without collecting it first, which would take streaming away from its caller.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use troupe_protocol::{ChatResponse, ChatStream, ModelDelta, ModelError, ResponseAssembler};

/// What a wrapper does as a stream it passes on is consumed.
pub trait StreamObserver: Send + 'static {
    /// The first delta arrived (called once, before it is passed on).
    fn first_delta(&mut self) {}

    /// A delta arrived (called for each, after [`StreamObserver::first_delta`], before it is
    /// passed on): what a recorder needs to keep how the answer was cut.
    fn delta(&mut self, _delta: &ModelDelta) {}

    /// The stream ended: with the response its deltas add up to, or its first error (or the
    /// assembler's, for deltas that do not add up). Called at most once.
    fn finished(self: Box<Self>, outcome: &Result<ChatResponse, ModelError>);

    /// The stream was dropped before it ended: its consumer gave up.
    fn dropped(self: Box<Self>) {}
}

/// `inner`, unchanged, with `observer` told about its first delta and its end; each poll runs
/// inside `span` (so a provider's own events land under it).
pub fn observe(
    inner: ChatStream,
    observer: Box<dyn StreamObserver>,
    span: tracing::Span,
) -> ChatStream {
    Box::pin(ObservedStream {
        inner,
        assembler: Some(ResponseAssembler::new()),
        observer: Some(observer),
        span,
        started: false,
    })
}

struct ObservedStream {
    inner: ChatStream,
    /// `None` once the deltas stopped adding up (the observer has been told).
    assembler: Option<ResponseAssembler>,
    /// `None` once the observer has been told how the stream ended.
    observer: Option<Box<dyn StreamObserver>>,
    span: tracing::Span,
    started: bool,
}

impl ObservedStream {
    fn finish(&mut self, outcome: &Result<ChatResponse, ModelError>) {
        self.assembler = None;
        if let Some(observer) = self.observer.take() {
            observer.finished(outcome);
        }
    }
}

impl Stream for ObservedStream {
    type Item = Result<ModelDelta, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let span = this.span.clone();
        let _entered = span.enter();
        let polled = this.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Pending => {}
            Poll::Ready(Some(Ok(delta))) => {
                if !this.started {
                    this.started = true;
                    if let Some(observer) = this.observer.as_mut() {
                        observer.first_delta();
                    }
                }
                if let Some(observer) = this.observer.as_mut() {
                    observer.delta(delta);
                }
                if let Some(assembler) = this.assembler.as_mut()
                    && let Err(e) = assembler.push(delta)
                {
                    this.finish(&Err(e));
                }
            }
            Poll::Ready(Some(Err(e))) => this.finish(&Err(e.clone())),
            Poll::Ready(None) => {
                if let Some(assembler) = this.assembler.take() {
                    this.finish(&assembler.finish());
                }
            }
        }
        polled
    }
}

impl Drop for ObservedStream {
    fn drop(&mut self) {
        if let Some(observer) = self.observer.take() {
            let _entered = self.span.enter();
            observer.dropped();
        }
    }
}
