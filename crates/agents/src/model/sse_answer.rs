//! A streamed answer's HTTP body → troupe's deltas, with the per-chunk timeout: the one reader
//! of every HTTP provider's server-sent events.
//!
//! The body is read a network chunk at a time ([`SseDecoder`] puts events back together, the
//! provider's [`EventDecoder`] turns each event's data into deltas). Every wait for the next network chunk is limited
//! by the request timeout: a server that goes quiet mid-answer is a
//! [`ModelError::Timeout`], however long the answer has been streaming. Dropping the stream
//! drops the response, which closes the connection: the server stops generating.

use std::collections::VecDeque;
use std::time::Duration;

use troupe_runtime::{ModelDelta, ModelError};

use super::sse::{SseDecoder, SseEvent};

/// What a provider knows of its streamed events: the deltas in one event's data, and whether
/// the answer said it was complete.
pub(super) trait EventDecoder: Send + 'static {
    /// The deltas in one event's data.
    ///
    /// # Errors
    /// [`ModelError::InvalidResponse`] when the data is not an event of the provider's (or is
    /// an error it sent instead), or another error the event stands for.
    fn decode(&mut self, data: &str) -> Result<Vec<ModelDelta>, ModelError>;

    /// Whether an event said the answer is complete (a finish reason, a stop event).
    fn finished(&self) -> bool;
}

/// A streamed answer being read.
pub(super) struct SseAnswer<D> {
    response: reqwest::Response,
    /// The longest wait for the next network chunk.
    gap: Duration,
    events: SseDecoder,
    chunks: D,
    /// Deltas decoded and not yet handed out.
    ready: VecDeque<ModelDelta>,
    /// The error that ended the answer, handed out after the deltas before it.
    failed: Option<ModelError>,
    /// No more reading: `[DONE]` came, the body ended, or it failed.
    ended: bool,
}

impl<D: EventDecoder> SseAnswer<D> {
    /// Read `response`'s body as a streamed answer, its events decoded by `chunks`.
    pub(super) fn new(response: reqwest::Response, gap: Duration, chunks: D) -> Self {
        SseAnswer {
            response,
            gap,
            events: SseDecoder::default(),
            chunks,
            ready: VecDeque::new(),
            failed: None,
            ended: false,
        }
    }

    /// The next delta; `None` after the last one, and after an error.
    pub(super) async fn next(&mut self) -> Option<Result<ModelDelta, ModelError>> {
        loop {
            if let Some(delta) = self.ready.pop_front() {
                return Some(Ok(delta));
            }
            if let Some(error) = self.failed.take() {
                return Some(Err(error));
            }
            if self.ended {
                return None;
            }
            if let Err(error) = self.read().await {
                self.ended = true;
                self.failed = Some(error);
            }
        }
    }

    /// Read the next network chunk and decode what it completes.
    async fn read(&mut self) -> Result<(), ModelError> {
        let chunk = tokio::time::timeout(self.gap, self.response.chunk())
            .await
            .map_err(|_| ModelError::Timeout(self.gap.as_secs().max(1)))?
            .map_err(|e| ModelError::Transport(format!("the streamed answer broke off: {e}")))?;
        match chunk {
            Some(bytes) => {
                let events = self.events.push(&bytes)?;
                self.handle(events)
            }
            None => {
                self.ended = true;
                let last = self.events.finish()?;
                self.handle(last.into_iter().collect())?;
                // A server that closes the stream after the finish without `[DONE]` (or
                // Anthropic's `message_stop`) has said everything that matters; one that closes
                // before it has not.
                if self.chunks.finished() {
                    Ok(())
                } else {
                    Err(ModelError::InvalidResponse(
                        "the stream ended before the answer was complete (no finish reason)"
                            .to_string(),
                    ))
                }
            }
        }
    }

    fn handle(&mut self, events: Vec<SseEvent>) -> Result<(), ModelError> {
        for event in events {
            match event {
                SseEvent::Data(data) => {
                    let deltas = self.chunks.decode(&data)?;
                    self.ready.extend(deltas);
                }
                SseEvent::Done => {
                    // Whatever follows `[DONE]` is not part of the answer.
                    self.ended = true;
                    if !self.chunks.finished() {
                        return Err(ModelError::InvalidResponse(
                            "the stream said [DONE] before the model said why it stopped"
                                .to_string(),
                        ));
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

impl<D: EventDecoder> crate::model::DeltaReader for SseAnswer<D> {
    fn next_delta(
        &mut self,
    ) -> impl std::future::Future<Output = Option<Result<ModelDelta, ModelError>>> + Send {
        self.next()
    }
}
