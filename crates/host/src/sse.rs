//! Server-sent events, as HTTP peers stream them — the model providers' answers and A2A agents'
//! task events alike: `data: ...` lines, each event ended by a blank line, `:` comments
//! (keep-alives) in between, lines ended by LF or CRLF; OpenAI-compatible servers end with
//! `data: [DONE]`, Anthropic names each event in an `event:` line that repeats the `type` its
//! data carries.
//!
//! Bytes are buffered and only complete lines are decoded, so an event — or a UTF-8
//! character — split across network chunks is put back together before anything reads it.
//! Each byte is looked at once: a chunk is searched for line ends from where the last chunk
//! stopped, so a line that arrives in many chunks costs its length, not its length squared.
//! A line and an event are capped ([`SseLimits`]), checked before a byte past the cap is kept:
//! a peer that sends a line without end, or `data:` lines without the blank line that ends
//! their event, is refused at the cap instead of being kept whole.

/// The most one line, and one event's data, may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseLimits {
    /// Bytes of one line, its line end left out.
    pub line: usize,
    /// Bytes of one event's data (its `data:` lines joined).
    pub event: usize,
}

/// Why bytes are not a stream of events. The same server would send the same again: never a
/// reason for another attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A line past [`SseLimits::line`].
    #[error("a streamed line is longer than the cap on one line ({cap} bytes)")]
    LineTooLong {
        /// The cap.
        cap: usize,
    },
    /// An event's data past [`SseLimits::event`].
    #[error("a streamed event's data is larger than the cap on one event ({cap} bytes)")]
    EventTooLarge {
        /// The cap.
        cap: usize,
    },
    /// A line that is not UTF-8.
    #[error("a streamed line is not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
}

/// One event of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent {
    /// An event's data: one JSON object (an OpenAI `chat.completion.chunk`, an Anthropic
    /// event, or an error object).
    Data(String),
    /// `data: [DONE]`: the answer is complete.
    Done,
}

/// Turns the body's bytes, as they arrive, into events.
#[derive(Debug)]
pub struct SseDecoder {
    limits: SseLimits,
    /// Bytes of a line not yet ended.
    partial: Vec<u8>,
    /// The `data:` lines of the event being read, joined by `\n` (the SSE rule).
    data: Option<String>,
    /// Bytes searched for a line end so far: the tests check each is searched once.
    #[cfg(test)]
    scanned: usize,
}

impl SseDecoder {
    /// A decoder holding every line and event to `limits`.
    pub fn new(limits: SseLimits) -> Self {
        SseDecoder {
            limits,
            partial: Vec::new(),
            data: None,
            #[cfg(test)]
            scanned: 0,
        }
    }

    /// The events completed by `bytes`.
    ///
    /// # Errors
    /// [`SseError`] when a line or an event is past its cap, or a complete line is not UTF-8.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            #[cfg(test)]
            {
                self.scanned += end + 1;
            }
            let (head, tail) = rest.split_at(end);
            rest = &tail[1..];
            self.check_line(head.len())?;
            let event = if self.partial.is_empty() {
                self.line(head)?
            } else {
                // Taken, not kept: a long line's buffer goes once the line is read.
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(head);
                self.line(&line)?
            };
            events.extend(event);
        }
        #[cfg(test)]
        {
            self.scanned += rest.len();
        }
        self.check_line(rest.len())?;
        self.partial.extend_from_slice(rest);
        Ok(events)
    }

    /// The event left when the body ends: a last event whose blank line never came.
    ///
    /// # Errors
    /// [`SseError`] as [`SseDecoder::push`].
    pub fn finish(&mut self) -> Result<Option<SseEvent>, SseError> {
        let rest = std::mem::take(&mut self.partial);
        let event = if rest.is_empty() {
            None
        } else {
            self.line(&rest)?
        };
        Ok(event.or_else(|| self.dispatch()))
    }

    /// Whether the line being read may grow by `more` bytes.
    fn check_line(&self, more: usize) -> Result<(), SseError> {
        if self.partial.len().saturating_add(more) > self.limits.line {
            return Err(SseError::LineTooLong {
                cap: self.limits.line,
            });
        }
        Ok(())
    }

    /// Read one complete line (a CR before its LF included); a blank line ends the event.
    fn line(&mut self, line: &[u8]) -> Result<Option<SseEvent>, SseError> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = std::str::from_utf8(line)?;
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None); // a comment: keep-alive
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        // One space after the colon is part of the syntax, not of the value.
        let value = value.strip_prefix(' ').unwrap_or(value);
        if field == "data" {
            let joined = self.data.as_ref().map_or(0, |data| data.len() + 1);
            if joined.saturating_add(value.len()) > self.limits.event {
                return Err(SseError::EventTooLarge {
                    cap: self.limits.event,
                });
            }
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
        // `event:`, `id:`, `retry:`: nothing troupe needs (Anthropic's `event:` names the type
        // its data carries again).
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let data = self.data.take()?;
        Some(if data.trim() == "[DONE]" {
            SseEvent::Done
        } else {
            SseEvent::Data(data)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOMY: SseLimits = SseLimits {
        line: 1 << 20,
        event: 1 << 20,
    };

    fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new(ROOMY);
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(decoder.push(chunk).unwrap());
        }
        events.extend(decoder.finish().unwrap());
        events
    }

    #[test]
    fn events_split_anywhere_and_crlf_and_comments_decode_the_same() {
        let body = ": keep-alive\r\n\r\ndata: {\"a\":\"é\"}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        let expected = vec![SseEvent::Data("{\"a\":\"é\"}".into()), SseEvent::Done];
        let bytes = body.as_bytes();
        for cut in 0..bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(decode(&[a, b]), expected, "cut at byte {cut}");
        }
        let one_byte_each: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode(&one_byte_each), expected);
    }

    /// Each byte is looked at once however the line is cut into network chunks: a line
    /// arriving in many chunks costs its length, not its length squared.
    #[test]
    fn a_long_line_in_many_chunks_is_scanned_once() {
        let mut decoder = SseDecoder::new(ROOMY);
        let line = format!("data: {}\n\n", "x".repeat(256 * 1024));
        let mut events = Vec::new();
        for chunk in line.as_bytes().chunks(1024) {
            events.extend(decoder.push(chunk).unwrap());
        }
        assert_eq!(events.len(), 1);
        assert_eq!(decoder.scanned, line.len());
    }

    #[test]
    fn multi_line_data_joins_and_a_last_event_without_blank_line_is_kept() {
        assert_eq!(
            decode(&[b"data: {\"a\":\ndata: 1}\n\ndata:{\"b\":2}"]),
            vec![
                SseEvent::Data("{\"a\":\n1}".into()),
                SseEvent::Data("{\"b\":2}".into())
            ]
        );
    }

    /// A line is refused as soon as it is past its cap, ended or not, comments too; an event
    /// as soon as its joined data is. What fits exactly is read.
    #[test]
    fn a_line_and_an_event_are_refused_at_their_caps_naming_which() {
        let limits = SseLimits {
            line: 16,
            event: 24,
        };
        let fits = b"data: 0123456789\n\n";
        let mut decoder = SseDecoder::new(limits);
        assert_eq!(decoder.push(fits).unwrap().len(), 1);
        for long in [&b"data: 0123456789A"[..], b": 0123456789ABCDEF\n"] {
            let mut decoder = SseDecoder::new(limits);
            let error = decoder.push(long).unwrap_err();
            assert_eq!(error, SseError::LineTooLong { cap: 16 });
            assert!(error.to_string().contains("cap on one line"), "{error}");
        }
        // Three lines of 10 bytes of data each: 10, 21, then 32 joined, past 24.
        let mut decoder = SseDecoder::new(limits);
        let error = decoder
            .push(b"data: 0123456789\ndata: 0123456789\ndata: 0123456789\n")
            .unwrap_err();
        assert_eq!(error, SseError::EventTooLarge { cap: 24 });
        assert!(error.to_string().contains("cap on one event"), "{error}");
    }
}
