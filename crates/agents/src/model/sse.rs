//! Server-sent events, as HTTP providers send a streamed answer: `data: {...}` lines, each
//! event ended by a blank line, `:` comments (keep-alives) in between, lines ended by LF or
//! CRLF; OpenAI-compatible servers end with `data: [DONE]`, Anthropic names each event in an
//! `event:` line that repeats the `type` its data carries.
//!
//! Bytes are buffered and only complete lines are decoded, so an event — or a UTF-8
//! character — split across network chunks is put back together before anything reads it.

use troupe_runtime::ModelError;

/// One event of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SseEvent {
    /// An event's data: one JSON object (an OpenAI `chat.completion.chunk`, an Anthropic
    /// event, or an error object).
    Data(String),
    /// `data: [DONE]`: the answer is complete.
    Done,
}

/// Turns the body's bytes, as they arrive, into events.
#[derive(Debug, Default)]
pub(super) struct SseDecoder {
    /// Bytes of a line not yet ended.
    partial: Vec<u8>,
    /// The `data:` lines of the event being read, joined by `\n` (the SSE rule).
    data: Option<String>,
}

impl SseDecoder {
    /// The events completed by `bytes`.
    ///
    /// # Errors
    /// [`ModelError::InvalidResponse`] when a complete line is not UTF-8.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, ModelError> {
        let mut buffer = std::mem::take(&mut self.partial);
        buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(offset) = buffer[start..].iter().position(|b| *b == b'\n') {
            let end = start + offset;
            let line = &buffer[start..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = std::str::from_utf8(line).map_err(|e| {
                ModelError::InvalidResponse(format!("a streamed line is not UTF-8: {e}"))
            })?;
            if let Some(event) = self.line(line) {
                events.push(event);
            }
            start = end + 1;
        }
        buffer.drain(..start);
        self.partial = buffer;
        Ok(events)
    }

    /// The event left when the body ends: a last event whose blank line never came.
    pub(super) fn finish(&mut self) -> Result<Option<SseEvent>, ModelError> {
        let rest = std::mem::take(&mut self.partial);
        let mut event = None;
        if !rest.is_empty() {
            let line = std::str::from_utf8(&rest).map_err(|e| {
                ModelError::InvalidResponse(format!("the last streamed line is not UTF-8: {e}"))
            })?;
            event = self.line(line.strip_suffix('\r').unwrap_or(line));
        }
        Ok(event.or_else(|| self.dispatch()))
    }

    /// Read one complete line; a blank line ends the event.
    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None; // a comment: keep-alive
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        // One space after the colon is part of the syntax, not of the value.
        let value = value.strip_prefix(' ').unwrap_or(value);
        if field == "data" {
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
        None
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

    fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::default();
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
}
