//! A local text answer as a stream: the pieces the inference thread sends as it samples, then
//! the usage and finish from its final report.
//!
//! The answer is trimmed as the whole answer always was (a model's leading and trailing
//! whitespace is not part of what it said): leading whitespace is dropped, and whitespace is
//! held back until more text follows it, so the collected stream is exactly the trimmed text.
//! Dropping the stream drops the piece receiver (the thread's next send fails) and sets the
//! job's cancel flag: generation stops at the next token.

use std::collections::VecDeque;

use tokio::sync::{mpsc, oneshot};
use troupe_protocol::{FinishReason, ModelDelta, ModelError, Usage};

use super::engine::{Generation, Stop};
use super::{CancelOnDrop, LocalModelError, log_generation};

/// A text answer being generated.
pub(super) struct TextAnswer {
    pieces: mpsc::Receiver<String>,
    /// The job's final report; `None` once read.
    reply: Option<oneshot::Receiver<Result<Generation, LocalModelError>>>,
    trim: Trim,
    /// The usage and finish, once the report is in.
    tail: VecDeque<ModelDelta>,
    _cancel: CancelOnDrop,
}

impl TextAnswer {
    /// The answer whose pieces arrive on `pieces` and whose report on `reply`; `cancel` stops
    /// the job when the answer is dropped.
    pub(super) fn new(
        pieces: mpsc::Receiver<String>,
        reply: oneshot::Receiver<Result<Generation, LocalModelError>>,
        cancel: CancelOnDrop,
    ) -> Self {
        TextAnswer {
            pieces,
            reply: Some(reply),
            trim: Trim::default(),
            tail: VecDeque::new(),
            _cancel: cancel,
        }
    }

    /// The next delta; `None` after the finish or an error.
    pub(super) async fn next(&mut self) -> Option<Result<ModelDelta, ModelError>> {
        loop {
            if let Some(delta) = self.tail.pop_front() {
                return Some(Ok(delta));
            }
            let reply = self.reply.as_mut()?;
            if let Some(piece) = self.pieces.recv().await {
                if let Some(text) = self.trim.push(&piece) {
                    return Some(Ok(ModelDelta::Text(text)));
                }
                continue;
            }
            // Every piece is in: the thread has finished the job (or dropped it).
            let report = reply.await;
            self.reply = None;
            let generation = match report {
                Ok(Ok(generation)) => generation,
                Ok(Err(e)) => return Some(Err(ModelError::from(e))),
                Err(_) => {
                    return Some(Err(ModelError::Unavailable(
                        "the inference thread dropped the request".into(),
                    )));
                }
            };
            log_generation(&generation);
            self.tail.push_back(ModelDelta::Usage(Usage {
                input_tokens: generation.prompt_tokens as u64,
                output_tokens: generation.output_tokens as u64,
                ..Default::default()
            }));
            self.tail
                .push_back(ModelDelta::Finished(match generation.stop {
                    Stop::EndOfTurn => FinishReason::Stop,
                    Stop::Length => FinishReason::Length,
                }));
        }
    }
}

impl crate::DeltaReader for TextAnswer {
    fn next_delta(
        &mut self,
    ) -> impl std::future::Future<Output = Option<Result<ModelDelta, ModelError>>> + Send {
        self.next()
    }
}

/// Streamed text with the whitespace around it removed.
#[derive(Debug, Default)]
struct Trim {
    /// Whether any non-whitespace has been passed on.
    started: bool,
    /// Whitespace held back until text follows it.
    held: String,
}

impl Trim {
    /// What of `piece` can be passed on now.
    fn push(&mut self, piece: &str) -> Option<String> {
        let piece = if self.started {
            piece
        } else {
            piece.trim_start()
        };
        if piece.is_empty() {
            return None;
        }
        let body = piece.trim_end();
        if body.is_empty() {
            self.held.push_str(piece);
            return None;
        }
        self.started = true;
        let mut out = std::mem::take(&mut self.held);
        out.push_str(body);
        self.held.push_str(&piece[body.len()..]);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimmed_pieces_add_up_to_the_trimmed_text() {
        let pieces = ["\n ", " Hello", ",", " ", " wor", "ld.", " \n", "\n"];
        let mut trim = Trim::default();
        let out: Vec<String> = pieces.iter().filter_map(|p| trim.push(p)).collect();
        assert_eq!(out.concat(), pieces.concat().trim());
        assert_eq!(out, ["Hello", ",", "  wor", "ld."]);
    }
}
