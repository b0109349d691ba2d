//! How large one answer of an HTTP provider may grow: caps that follow the tokens it was asked
//! for, so a server that streams without end (or sends one event the size of a disk) is
//! refused at the cap instead of being read whole into memory.
//!
//! | cap | what it bounds | size |
//! |---|---|---|
//! | answer | the content passed on: text, tool calls' ids, names and arguments, message fields' text, and what a decoder holds back until it can pass it on | [`BYTES_PER_TOKEN`] × the tokens, at least [`ANSWER_FLOOR`] |
//! | line, event | one SSE line, one event's data; a whole (non-streamed) body | the answer cap escaped ([`ESCAPED`] bytes a byte) plus an [`ENVELOPE`] |
//!
//! The tokens are the request's `max_tokens`, or, without one, the model's context window
//! (no answer is longer than the window).

use troupe_host::sse::SseLimits;

/// Bytes of answer one token may stand for. Generous: a token of prose is about four bytes,
/// and the longest tokens of the common vocabularies (runs of spaces or dashes) are rare, so
/// a real answer never meets the cap while a runaway one is stopped within a small multiple
/// of what it could have been asked for.
pub(super) const BYTES_PER_TOKEN: usize = 32;

/// The smallest answer cap, however few tokens were asked for: a server that ignores a small
/// `max_tokens` (some compatible ones do) still gets its short answer through.
pub(super) const ANSWER_FLOOR: usize = 256 * 1024;

/// The most one byte of answer takes in an event's JSON (`\u0000`): an event may carry a
/// whole answer, all of it escaped.
pub(super) const ESCAPED: usize = 6;

/// Room around an event's piece of answer for the rest of it (ids, the model's name, usage).
pub(super) const ENVELOPE: usize = 64 * 1024;

/// An answer's caps (see the module's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AnswerLimits {
    /// The tokens the caps were made for.
    tokens: usize,
    /// Bytes of content.
    answer: usize,
    /// One SSE line and one event's data: also a whole body's bytes.
    pub(super) sse: SseLimits,
}

/// An answer past its cap; the same request would get the same, so it is never retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the answer is larger than its cap of {cap} bytes ({BYTES_PER_TOKEN} bytes a token for the \
     {tokens} tokens it may hold, at least {ANSWER_FLOOR})"
)]
pub(super) struct AnswerTooLarge {
    cap: usize,
    tokens: usize,
}

/// A whole (non-streamed) body past its cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the answer's body is larger than its cap of {cap} bytes")]
pub(super) struct BodyTooLarge {
    /// The cap.
    pub(super) cap: usize,
}

impl AnswerLimits {
    /// The caps for an answer of at most `max_tokens` (`None`: the window's worth) from a
    /// model whose context window is `window` tokens.
    pub(super) fn new(max_tokens: Option<u32>, window: usize) -> Self {
        let tokens = max_tokens.map_or(window, |n| n as usize);
        let answer = tokens.saturating_mul(BYTES_PER_TOKEN).max(ANSWER_FLOOR);
        let event = answer.saturating_mul(ESCAPED).saturating_add(ENVELOPE);
        AnswerLimits {
            tokens,
            answer,
            sse: SseLimits { line: event, event },
        }
    }

    /// Whether `bytes` of content are within the answer cap.
    ///
    /// # Errors
    /// [`AnswerTooLarge`] naming the cap.
    pub(super) fn check(&self, bytes: usize) -> Result<(), AnswerTooLarge> {
        if bytes > self.answer {
            return Err(AnswerTooLarge {
                cap: self.answer,
                tokens: self.tokens,
            });
        }
        Ok(())
    }

    /// The most a whole (non-streamed) body may hold: an event's cap, as such a body is the
    /// whole answer in one JSON object.
    pub(super) fn body(&self) -> usize {
        self.sse.event
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_follow_the_tokens_asked_for_with_a_floor() {
        let small = AnswerLimits::new(Some(16), 128_000);
        assert_eq!(small.answer, ANSWER_FLOOR);
        assert_eq!(small.sse.line, ANSWER_FLOOR * ESCAPED + ENVELOPE);
        assert_eq!(small.sse.line, small.sse.event);
        let large = AnswerLimits::new(Some(100_000), 128_000);
        assert_eq!(large.answer, 100_000 * BYTES_PER_TOKEN);
        // Without max_tokens the window bounds the answer.
        assert_eq!(
            AnswerLimits::new(None, 200_000).answer,
            200_000 * BYTES_PER_TOKEN
        );
        assert_eq!(large.check(100_000 * BYTES_PER_TOKEN), Ok(()));
        let past = large.check(100_000 * BYTES_PER_TOKEN + 1).unwrap_err();
        assert!(past.to_string().contains("cap of 3200000 bytes"), "{past}");
        // Absurd numbers saturate instead of wrapping to a tiny cap.
        let huge = AnswerLimits::new(None, usize::MAX);
        assert_eq!((huge.answer, huge.sse.event), (usize::MAX, usize::MAX));
    }
}
