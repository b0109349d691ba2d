//! Server-sent events as A2A streams them: `data: {json-rpc response}` lines, each event ended
//! by a blank line, `:` comments (keep-alives) between. Only whole lines are decoded; a line and
//! an event's data are capped, so a peer that never ends a line or an event is refused at the
//! cap instead of being kept whole.

use crate::error::A2aError;

/// Turns a body's bytes, as they arrive, into events' data.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    cap: usize,
    /// Bytes of a line not yet ended.
    partial: Vec<u8>,
    /// Where the search for a line end resumes in `partial`.
    searched: usize,
    /// The `data:` lines of the event being read, joined by `\n`.
    data: String,
    has_data: bool,
}

impl SseDecoder {
    /// A decoder refusing a line or an event's data over `cap` bytes.
    pub(crate) fn new(cap: usize) -> Self {
        SseDecoder {
            cap,
            partial: Vec::new(),
            searched: 0,
            data: String::new(),
            has_data: false,
        }
    }

    /// The events `chunk` completes, in order.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, A2aError> {
        self.partial.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        let mut from = self.searched;
        while let Some(offset) = self.partial[from..].iter().position(|b| *b == b'\n') {
            let end = from + offset;
            let mut line = &self.partial[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = std::str::from_utf8(line)
                .map_err(|e| A2aError::Malformed {
                    what: "a streamed line".into(),
                    reason: e.to_string(),
                })?
                .to_string();
            if let Some(event) = self.line(&line)? {
                events.push(event);
            }
            start = end + 1;
            from = start;
        }
        self.partial.drain(..start);
        self.searched = self.partial.len();
        if self.partial.len() > self.cap {
            return Err(A2aError::TooLarge {
                what: "a streamed line".into(),
                cap: self.cap,
            });
        }
        Ok(events)
    }

    fn line(&mut self, line: &str) -> Result<Option<String>, A2aError> {
        if line.is_empty() {
            if !self.has_data {
                return Ok(None);
            }
            self.has_data = false;
            return Ok(Some(std::mem::take(&mut self.data)));
        }
        if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
            if self.data.len() > self.cap {
                return Err(A2aError::TooLarge {
                    what: "a streamed event".into(),
                    cap: self.cap,
                });
            }
        }
        // `event:`, `id:`, `retry:` and `:` comments carry nothing troupe reads: the data says
        // whether it is an error.
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_are_put_back_together() {
        let body = b"data: {\"a\":1}\r\n\r\n: keep-alive\n\ndata: x\ndata: y\n\n";
        for split in 0..body.len() {
            let mut decoder = SseDecoder::new(1024);
            let mut events = decoder.push(&body[..split]).unwrap();
            events.extend(decoder.push(&body[split..]).unwrap());
            assert_eq!(events, vec!["{\"a\":1}".to_string(), "x\ny".to_string()]);
        }
    }

    #[test]
    fn a_line_without_end_and_an_event_without_end_are_refused_at_the_cap() {
        let mut decoder = SseDecoder::new(64);
        let err = decoder.push(&[b'a'; 65]).unwrap_err();
        assert!(matches!(err, A2aError::TooLarge { .. }), "{err}");
        let mut decoder = SseDecoder::new(64);
        let mut refused = false;
        for _ in 0..10 {
            if decoder.push(b"data: 0123456789\n").is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused, "an event's data grew past its cap");
    }
}
