//! A streamed answer's HTTP body → troupe's deltas, with its clocks and caps: the one reader
//! of every HTTP provider's server-sent events.
//!
//! The body is read a network chunk at a time ([`SseDecoder`] puts events back together, the
//! provider's [`EventDecoder`] turns each event's data into deltas). Two clocks bound it
//! ([`Deadlines`]): the next event must come within the request timeout of the one before —
//! a comment (a keep-alive) is not an event, so a server that only keeps the connection open
//! has gone quiet — and the whole attempt must be over by its deadline, however much keeps
//! coming. Its content is capped ([`AnswerLimits`]). How it fails says whether another attempt
//! may do better ([`StreamFault`]). Dropping the stream drops the response, which closes the
//! connection: the server stops generating.

use std::collections::VecDeque;
use std::fmt::Display;

use tokio::time::Instant;
use troupe_protocol::{ModelDelta, ModelError};

use super::answer_limits::AnswerLimits;
use super::deadlines::{Deadlines, Wait};
use troupe_host::sse::{SseDecoder, SseEvent};

/// Why a streamed answer failed, as far as another attempt is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StreamFault {
    /// It broke off, went quiet, ran out of time or ended early, or the server reported a
    /// failure in it: another attempt may get the whole answer (when nothing was passed on
    /// yet).
    Interrupted(ModelError),
    /// It is not an answer, or not one troupe takes: bytes past a cap, a line that is not
    /// UTF-8, an event that does not parse or cannot follow the ones before it. The same
    /// request would get the same again: never retried.
    Malformed(ModelError),
}

impl StreamFault {
    /// A malformed answer, for `why`.
    pub(super) fn malformed(why: impl Display) -> Self {
        StreamFault::Malformed(ModelError::InvalidResponse(why.to_string()))
    }

    /// The error the caller sees.
    pub(super) fn into_error(self) -> ModelError {
        match self {
            StreamFault::Interrupted(e) | StreamFault::Malformed(e) => e,
        }
    }
}

/// What a provider knows of its streamed events: the deltas in one event's data, whether the
/// answer said it was complete, and what it holds back.
pub(super) trait EventDecoder: Send + 'static {
    /// The deltas in one event's data.
    ///
    /// # Errors
    /// [`StreamFault::Malformed`] when the data is not an event of the provider's;
    /// [`StreamFault::Interrupted`] for an error the server sent instead of the rest.
    fn decode(&mut self, data: &str) -> Result<Vec<ModelDelta>, StreamFault>;

    /// Whether an event said the answer is complete (a finish reason, a stop event).
    fn finished(&self) -> bool;

    /// Bytes of answer decoded but not yet passed on as deltas (arguments before their call's
    /// name, a typed ask's answer until its block ends): they count against the answer's cap.
    fn held_back(&self) -> usize;
}

/// A streamed answer being read.
pub(super) struct SseAnswer<D> {
    response: reqwest::Response,
    deadlines: Deadlines,
    /// The wait for the next event: from the one before (or the response's head), within the
    /// attempt's deadline.
    next_event: Wait,
    events: SseDecoder,
    chunks: D,
    limits: AnswerLimits,
    /// Bytes of content decoded into deltas so far.
    content: usize,
    /// Deltas decoded and not yet handed out.
    ready: VecDeque<ModelDelta>,
    /// The fault that ended the answer, handed out after the deltas before it.
    failed: Option<StreamFault>,
    /// No more reading: `[DONE]` came, the body ended, or it failed.
    ended: bool,
}

impl<D: EventDecoder> SseAnswer<D> {
    /// Read `response`'s body as a streamed answer within `deadlines` and `limits`, its events
    /// decoded by `chunks`.
    pub(super) fn new(
        response: reqwest::Response,
        deadlines: Deadlines,
        limits: AnswerLimits,
        chunks: D,
    ) -> Self {
        SseAnswer {
            response,
            deadlines,
            next_event: deadlines.wait_from(Instant::now()),
            events: SseDecoder::new(limits.sse),
            chunks,
            limits,
            content: 0,
            ready: VecDeque::new(),
            failed: None,
            ended: false,
        }
    }

    /// The next delta; `None` after the last one, and after a fault.
    pub(super) async fn next(&mut self) -> Option<Result<ModelDelta, StreamFault>> {
        loop {
            if let Some(delta) = self.ready.pop_front() {
                return Some(Ok(delta));
            }
            if let Some(fault) = self.failed.take() {
                return Some(Err(fault));
            }
            if self.ended {
                return None;
            }
            if let Err(fault) = self.read().await {
                self.ended = true;
                self.failed = Some(fault);
            }
        }
    }

    /// Read the next network chunk and decode what it completes.
    async fn read(&mut self) -> Result<(), StreamFault> {
        let chunk = self
            .next_event
            .run(self.response.chunk())
            .await
            .map_err(StreamFault::Interrupted)?
            .map_err(|e| {
                StreamFault::Interrupted(ModelError::Transport(format!(
                    "the streamed answer broke off: {e}"
                )))
            })?;
        match chunk {
            Some(bytes) => {
                let events = self.events.push(&bytes).map_err(StreamFault::malformed)?;
                if !events.is_empty() {
                    // An event is progress; a comment or a piece of a line is not.
                    self.next_event = self.deadlines.wait_from(Instant::now());
                }
                self.handle(events)
            }
            None => {
                self.ended = true;
                let last = self.events.finish().map_err(StreamFault::malformed)?;
                self.handle(last.into_iter().collect())?;
                // A server that closes the stream after the finish without `[DONE]` (or
                // Anthropic's `message_stop`) has said everything that matters; one that closes
                // before it has not.
                if self.chunks.finished() {
                    Ok(())
                } else {
                    Err(StreamFault::Interrupted(ModelError::InvalidResponse(
                        "the stream ended before the answer was complete (no finish reason)"
                            .to_string(),
                    )))
                }
            }
        }
    }

    fn handle(&mut self, events: Vec<SseEvent>) -> Result<(), StreamFault> {
        for event in events {
            match event {
                SseEvent::Data(data) => {
                    let deltas = self.chunks.decode(&data)?;
                    self.content = deltas
                        .iter()
                        .fold(self.content, |n, d| n.saturating_add(content_len(d)));
                    self.limits
                        .check(self.content.saturating_add(self.chunks.held_back()))
                        .map_err(StreamFault::malformed)?;
                    self.ready.extend(deltas);
                }
                SseEvent::Done => {
                    // Whatever follows `[DONE]` is not part of the answer.
                    self.ended = true;
                    if !self.chunks.finished() {
                        return Err(StreamFault::malformed(
                            "the stream said [DONE] before the model said why it stopped",
                        ));
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// The bytes of answer a delta carries.
fn content_len(delta: &ModelDelta) -> usize {
    match delta {
        ModelDelta::Text(text) => text.len(),
        ModelDelta::ToolCallStarted { id, name, .. } => id.len() + name.len(),
        ModelDelta::ToolCallArguments { fragment, .. } => fragment.len(),
        ModelDelta::MessageField { key, value } => key.len() + value.as_str().map_or(0, str::len),
        ModelDelta::ToolCallFields { .. } | ModelDelta::Usage(_) | ModelDelta::Finished(_) => 0,
    }
}

impl<D: EventDecoder> crate::DeltaReader for SseAnswer<D> {
    async fn next_delta(&mut self) -> Option<Result<ModelDelta, ModelError>> {
        self.next()
            .await
            .map(|item| item.map_err(StreamFault::into_error))
    }
}
